#include "lathe/train/data_parallel_step.h"

#include <unistd.h>

#include <chrono>

#include "lathe/train/lr_schedule.h"

namespace lathe {
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

DataParallelShare plan_data_parallel_share(const TrainSection& train, int rank, int world_size) {
  LATHE_ASSERT(world_size >= 1 && rank >= 0 && rank < world_size);
  DataParallelShare share;
  share.global_batch = train.batch_size * train.grad_accum;
  LATHE_CHECK(share.global_batch % world_size == 0, "world size ", world_size,
              " does not divide the global batch train.batch_size * train.grad_accum = ", train.batch_size, " * ",
              train.grad_accum, " = ", share.global_batch, " sequences (choose a world size that divides it)");
  share.rows = share.global_batch / world_size;
  share.first_row = rank * share.rows;
  share.micro_batch_rows = std::min(share.rows, train.batch_size);
  share.micro_batches = (share.rows + share.micro_batch_rows - 1) / share.micro_batch_rows;
  return share;
}

DataParallelStep::DataParallelStep(TransformerModel& model, const TrainConfig& config, Communicator& communicator)
    : model_(model),
      config_(config),
      communicator_(communicator),
      share_(plan_data_parallel_share(config.train, communicator.rank(), communicator.world_size())),
      reducer_(model.parameters(), communicator,
               GradientReducerOptions{static_cast<int64_t>(config.dist.bucket_mb * 1e6), config.dist.overlap}) {
  inputs_ = Tensor::empty({share_.rows, config.train.seq_len}, DType::i32);
  targets_ = Tensor::empty({share_.rows, config.train.seq_len}, DType::i32);
  if (config.dist.shard_optimizer)
    sharded_optimizer_ = std::make_unique<ShardedAdamW>(model.parameters(), config.optimizer, communicator);
  else
    whole_optimizer_ = std::make_unique<AdamWOptimizer>(model.parameters(), config.optimizer);
  // The staging directory of sharded checkpoints carries rank 0's pid, so a later run's
  // CheckpointManager removes it when a crash left it behind (train/checkpoint.h).
  double process_id = communicator.rank() == 0 ? static_cast<double>(::getpid()) : 0.0;
  communicator.all_reduce_sum(&process_id, 1);
  rank_0_process_id_ = static_cast<int64_t>(process_id);
}

void DataParallelStep::load_optimizer_state(const LoadedCheckpoint& checkpoint) {
  if (sharded_optimizer_)
    sharded_optimizer_->load(checkpoint);
  else
    whole_optimizer_->load_state(whole_optimizer_state(checkpoint, model_.parameters()));
}

void DataParallelStep::add_optimizer_state(CheckpointContents& contents, const std::string& checkpoints_dir,
                                           int64_t step) {
  if (whole_optimizer_) {
    if (communicator_.rank() == 0)
      for (const auto& [name, tensor] : whole_optimizer_->state()) contents.optimizer.emplace_back(name, tensor);
    return;
  }
  const std::string staging_dir =
      str_cat(checkpoints_dir, "/", checkpoint_directory_name(step), ".shards.tmp.", rank_0_process_id_);
  contents.staged_files = sharded_optimizer_->write_shards(staging_dir, step);
}

std::string DataParallelStep::describe_communication() const {
  if (steps_run_ == 0) return "gradient all-reduce: no steps run";
  const double steps = static_cast<double>(steps_run_);
  const GradientReductionStats& total = reduction_totals_;
  return str_cat("gradient all-reduce: ", total.buckets / steps_run_, " bucket(s) (",
                 static_cast<double>(total.bytes / steps_run_ / 10000) / 100.0, " MB) per step, ",
                 static_cast<int64_t>(total.communication_seconds / steps * 1e4) / 10.0, " ms per step of which ",
                 static_cast<int64_t>(total.exposed_seconds / steps * 1e4) / 10.0, " ms exposed after backward (",
                 static_cast<int64_t>(100 * total.overlap_fraction()), "% overlapped)");
}

std::string DataParallelStep::describe_memory() const {
  auto megabytes = [](int64_t bytes) { return str_cat(static_cast<double>(bytes / 10000) / 100.0, " MB"); };
  const int64_t weights = model_.parameter_count() * 4, whole_state = 2 * weights;
  if (!sharded_optimizer_)
    return str_cat("optimizer state replicated: ", megabytes(whole_state), " per rank (dist.shard_optimizer=false)");
  return str_cat("ZeRO-1: optimizer state ", megabytes(sharded_optimizer_->state_bytes()), " on this rank (1/",
                 communicator_.world_size(), " of ", megabytes(whole_state), "); per rank: weights ",
                 megabytes(weights), " + gradients ", megabytes(weights), " + moments ",
                 megabytes(sharded_optimizer_->state_bytes()), " + all-gather buffer ",
                 megabytes(sharded_optimizer_->gather_buffer_bytes()), " (a single process: weights + gradients + ",
                 megabytes(whole_state), " of moments)");
}

StepResult DataParallelStep::run(int64_t step, DataLoader& loader, StepPhaseSeconds* phases) {
  StepPhaseSeconds local_phases;
  if (!phases) phases = &local_phases;
  *phases = {};
  const double batch_start = seconds_now();
  loader.next_batch_slice(inputs_, targets_, share_.global_batch, share_.first_row);
  phases->forward += seconds_now() - batch_start;
  model_.zero_grads();
  double weighted_loss = 0;  // sum over this rank's micro-batches of mean loss * rows / global batch
  for (int64_t micro = 0; micro < share_.micro_batches; ++micro) {
    const int64_t begin = micro * share_.micro_batch_rows;
    const int64_t rows = std::min(share_.micro_batch_rows, share_.rows - begin);
    const Tensor inputs = inputs_.share_view(inputs_.view().slice(0, begin, begin + rows));
    const Tensor targets = targets_.share_view(targets_.view().slice(0, begin, begin + rows));
    const double weight = static_cast<double>(rows) / static_cast<double>(share_.global_batch);
    const bool last = micro + 1 == share_.micro_batches;
    const double start = seconds_now();
    if (last) reducer_.before_forward();
    autograd::Tape tape;
    autograd::Var loss = model_.loss(tape, inputs, targets, config_.train.remat, static_cast<float>(weight));
    const double forward_end = seconds_now();
    if (last) reducer_.watch(tape);
    tape.backward(loss);
    phases->forward += forward_end - start;
    phases->backward += seconds_now() - forward_end;
    weighted_loss += read_element(loss->value, 0) * weight;
  }
  const double reduce_start = seconds_now();
  reducer_.finish();
  const GradientReductionStats& reduction = reducer_.last_stats();
  ++steps_run_;
  reduction_totals_.buckets += reduction.buckets;
  reduction_totals_.bytes += reduction.bytes;
  reduction_totals_.communication_seconds += reduction.communication_seconds;
  reduction_totals_.exposed_seconds += reduction.exposed_seconds;
  communicator_.all_reduce_sum(&weighted_loss, 1);
  phases->backward += seconds_now() - reduce_start;

  const double optimizer_start = seconds_now();
  StepResult result;
  result.loss = weighted_loss;
  result.lr = learning_rate(config_.optimizer, config_.train.steps, step);
  result.grad_norm =
      sharded_optimizer_ ? sharded_optimizer_->step(step, result.lr) : whole_optimizer_->step(step, result.lr);
  phases->optimizer = seconds_now() - optimizer_start;
  return result;
}

double DataParallelStep::validation_loss(const DataLoader& loader, int64_t batches) {
  const int world = communicator_.world_size(), rank = communicator_.rank();
  const int64_t mine = batches > rank ? (batches - rank + world - 1) / world : 0;
  double sum =
      mine == 0
          ? 0.0
          : evaluate_loss(model_, config_, mine, [&](int64_t k, const TensorView& inputs, const TensorView& targets) {
              loader.validation_batch(rank + k * world, inputs, targets);
            }) * static_cast<double>(mine);
  communicator_.all_reduce_sum(&sum, 1);
  return batches > 0 ? sum / static_cast<double>(batches) : 0.0;
}

}  // namespace lathe
