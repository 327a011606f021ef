#include "lathe/train/data_parallel_step.h"

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

DataParallelStep::DataParallelStep(TransformerModel& model, AdamWOptimizer& optimizer, const TrainConfig& config,
                                   Communicator& communicator)
    : model_(model),
      optimizer_(optimizer),
      config_(config),
      communicator_(communicator),
      share_(plan_data_parallel_share(config.train, communicator.rank(), communicator.world_size())),
      reducer_(model.parameters(), communicator,
               GradientReducerOptions{static_cast<int64_t>(config.dist.bucket_mb * 1e6), config.dist.overlap}) {
  inputs_ = Tensor::empty({share_.rows, config.train.seq_len}, DType::i32);
  targets_ = Tensor::empty({share_.rows, config.train.seq_len}, DType::i32);
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
  communicator_.all_reduce_sum(&weighted_loss, 1);
  phases->backward += seconds_now() - reduce_start;

  const double optimizer_start = seconds_now();
  StepResult result;
  result.loss = weighted_loss;
  result.lr = learning_rate(config_.optimizer, config_.train.steps, step);
  result.grad_norm = optimizer_.step(step, result.lr);
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
