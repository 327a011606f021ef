#include "lathe/train/train_step.h"

#include <unistd.h>

#include "lathe/core/clock.h"
#include "lathe/device/device_tensor.h"
#include "lathe/models/expert_parallel.h"
#include "lathe/models/memory_estimate.h"
#include "lathe/train/lr_schedule.h"
#include "lathe/train/parallel/expert_parallel_training.h"
#include "lathe/train/parallel/sharded_optimizer.h"

namespace lathe {
NextBatchSlice single_process_batches(NextBatch next_batch, int64_t micro_batch_rows) {
  return [next_batch = std::move(next_batch), micro_batch_rows](const TensorView& inputs, const TensorView& targets,
                                                                int64_t global_batch, int64_t first_row) {
    LATHE_ASSERT(first_row == 0 && inputs.dim(0) == global_batch && global_batch % micro_batch_rows == 0);
    for (int64_t begin = 0; begin < global_batch; begin += micro_batch_rows)
      next_batch(inputs.slice(0, begin, begin + micro_batch_rows), targets.slice(0, begin, begin + micro_batch_rows));
  };
}

namespace {

// Adds one micro-batch's router statistics to sums = [aux, z, mtp, counts of MoE layer 0..., ...].
void add_routing(const RouterStatistics& routing, double weight, std::vector<double>& sums) {
  if (sums.empty()) {
    size_t size = 3;
    for (const std::vector<int64_t>& counts : routing.expert_counts) size += counts.size();
    sums.assign(size, 0.0);
  }
  sums[0] += routing.aux_loss * weight;
  sums[1] += routing.z_loss * weight;
  sums[2] += routing.mtp_loss * weight;
  size_t at = 3;
  for (const std::vector<int64_t>& counts : routing.expert_counts)
    for (int64_t count : counts) sums[at++] += static_cast<double>(count);
}

}  // namespace

void TrainStep::fill_routing(const std::vector<double>& sums, StepResult& result) const {
  result.aux_loss = sums[0];
  result.z_loss = sums[1];
  result.mtp_loss = sums[2];
  const int64_t experts = model_.config().moe_experts;
  size_t at = 3;
  for (int64_t layer : model_.moe_layers()) {
    ExpertLoad load;
    load.layer = layer;
    double total = 0;
    load.min_tokens = INT64_MAX;
    for (int64_t e = 0; e < experts; ++e, ++at) {
      const auto count = static_cast<int64_t>(sums[at]);
      load.min_tokens = std::min(load.min_tokens, count);
      load.max_tokens = std::max(load.max_tokens, count);
      total += sums[at];
    }
    load.mean_tokens = total / static_cast<double>(experts);
    result.expert_load.push_back(load);
  }
}

void TrainStep::update_selection_biases(const std::vector<double>& sums) {
  const int64_t experts = model_.config().moe_experts;
  const auto rate = static_cast<float>(model_.config().moe_bias_update_rate);
  size_t at = 3;
  for (const autograd::Var& bias : selection_biases_) {
    double total = 0;
    for (int64_t e = 0; e < experts; ++e) total += sums[at + e];
    if (bias) {  // a few floats: updated on the host, copied back to a device bias
      const Tensor host = on_host(bias->value);
      float* values = host.ptr<float>();
      for (int64_t e = 0; e < experts; ++e) {
        // mean - count_e compared exactly in integers: total - experts * count_e
        const double difference = total - static_cast<double>(experts) * sums[at + e];
        values[e] += rate * static_cast<float>((difference > 0) - (difference < 0));
      }
      if (bias->value.view().device != Device::cpu) cuda::copy(bias->value.view(), host.view());
    }
    at += static_cast<size_t>(experts);
  }
}

TrainStep::TrainStep(TransformerModel& model, const TrainConfig& config, Communicator& communicator)
    : config_(config),
      model_(model),
      communicator_(communicator),
      share_(plan_data_parallel_share(config.train, communicator.rank(), communicator.world_size())) {
  inputs_ = Tensor::empty({share_.rows, config_.train.seq_len}, DType::i32);
  targets_ = Tensor::empty({share_.rows, config_.train.seq_len}, DType::i32);
  const bool distributed = communicator.world_size() > 1;
  const bool expert_parallel = config_.dist.expert_parallel;
  if (expert_parallel) {  // before the optimizer and the reducer see the parameters' shapes
    check_expert_parallel_run(config_, communicator.world_size());
    if (!model.expert_shard()) model.shard_experts(std::make_shared<CommunicatorExpertTransport>(communicator));
    for (const Parameter& parameter : model.parameters())
      if (!parameter.expert_shard) replicated_parameters_.push_back(parameter);
  }
  if (distributed)
    reducer_ =
        std::make_unique<GradientReducer>(expert_parallel ? replicated_parameters_ : model.parameters(), communicator,
                                          GradientReducerOptions{static_cast<int64_t>(config_.dist.bucket_mb * 1e6),
                                                                 config_.dist.overlap && !expert_parallel});
  if (distributed && config_.dist.shard_optimizer)
    sharded_optimizer_ = std::make_unique<ShardedAdamW>(model.parameters(), config_.optimizer, communicator,
                                                        static_cast<int64_t>(config_.dist.bucket_mb * 1e6));
  else
    whole_optimizer_ = std::make_unique<AdamWOptimizer>(model.parameters(), config_.optimizer);
  // The staging directory of sharded checkpoints carries rank 0's pid, so a later run's
  // CheckpointManager removes it when a crash left it behind (train/checkpoint.h).
  for (int64_t layer : model.moe_layers()) {
    const Parameter* bias = model.find_parameter(str_cat("model.layers.", layer, ".mlp.gate.e_score_correction_bias"));
    selection_biases_.push_back(bias ? bias->var : nullptr);
  }
  double process_id = communicator.rank() == 0 ? static_cast<double>(::getpid()) : 0.0;
  communicator.all_reduce_sum(&process_id, 1);
  rank_0_process_id_ = static_cast<int64_t>(process_id);
}

TrainStep::~TrainStep() = default;

StepResult TrainStep::run(int64_t step, BatchSource& loader, StepPhaseSeconds* phases) {
  return run(
      step,
      [&loader](const TensorView& inputs, const TensorView& targets, int64_t global_batch, int64_t first_row) {
        loader.next_batch_slice(inputs, targets, global_batch, first_row);
      },
      phases);
}

StepResult TrainStep::run(int64_t step, const NextBatchSlice& next, StepPhaseSeconds* phases) {
  StepPhaseSeconds local_phases;
  if (!phases) phases = &local_phases;
  *phases = {};
  const double batch_start = now_seconds();
  next(inputs_, targets_, share_.global_batch, share_.first_row);
  phases->data = now_seconds() - batch_start;
  phases->forward += phases->data;
  model_.zero_grads();
  // Masked targets (SFT): each micro-batch weighs its share of the valid targets of the whole
  // global batch (all ranks). Text: rows / global batch.
  const bool weigh_by_tokens = config_.data.format == "sft";
  double global_valid = 0;
  if (weigh_by_tokens) {
    global_valid = static_cast<double>(count_valid_targets(targets_));
    communicator_.all_reduce_sum(&global_valid, 1);
  }
  const double global_rows = static_cast<double>(share_.global_batch);
  double weighted_loss = 0;  // sum over this rank's micro-batches of mean loss * weight
  // Mixture of experts: [aux, z, mtp, then every MoE layer's per-expert token counts], summed like the loss.
  std::vector<double> routing_sums;
  for (int64_t micro = 0; micro < share_.micro_batches; ++micro) {
    const int64_t begin = micro * share_.micro_batch_rows;
    const int64_t rows = std::min(share_.micro_batch_rows, share_.rows - begin);
    const Tensor inputs = inputs_.share_view(inputs_.view().slice(0, begin, begin + rows));
    const Tensor targets = targets_.share_view(targets_.view().slice(0, begin, begin + rows));
    const double weight = !weigh_by_tokens   ? static_cast<double>(rows) / global_rows
                          : global_valid > 0 ? static_cast<double>(count_valid_targets(targets)) / global_valid
                                             : 0.0;
    const bool last = micro + 1 == share_.micro_batches;
    const double start = now_seconds();
    if (last && reducer_) reducer_->before_forward();
    autograd::Tape tape;
    RouterStatistics routing;
    autograd::Var loss = model_.loss(tape, on_device(model_.device(), inputs), on_device(model_.device(), targets),
                                     config_.train.remat, static_cast<float>(weight), &routing);
    const double forward_end = now_seconds();
    if (last && reducer_) reducer_->watch(tape);
    tape.backward(loss);
    phases->forward += forward_end - start;
    phases->backward += now_seconds() - forward_end;
    const double micro_loss = scalar_value(loss->value);
    // Text divides by global / rows (grad_accum in one process), exact when it is a power of two.
    weighted_loss += weigh_by_tokens ? micro_loss * weight : micro_loss / (global_rows / static_cast<double>(rows));
    if (model_.has_experts()) add_routing(routing, weight, routing_sums);
  }
  if (reducer_) {
    const double reduce_start = now_seconds();
    reducer_->finish();
    const GradientReductionStats& reduction = reducer_->last_stats();
    reduction_totals_.buckets += reduction.buckets;
    reduction_totals_.bytes += reduction.bytes;
    reduction_totals_.communication_seconds += reduction.communication_seconds;
    reduction_totals_.exposed_seconds += reduction.exposed_seconds;
    communicator_.all_reduce_sum(&weighted_loss, 1);
    if (!routing_sums.empty()) communicator_.all_reduce_sum(routing_sums.data(), routing_sums.size());
    phases->backward += now_seconds() - reduce_start;
  }
  ++steps_run_;

  const double optimizer_start = now_seconds();
  StepResult result;
  result.loss = weighted_loss;
  if (!routing_sums.empty()) fill_routing(routing_sums, result);
  result.lr = learning_rate(config_.optimizer, config_.train.steps, step);
  if (sharded_optimizer_)
    result.grad_norm = sharded_optimizer_->step(step, result.lr);
  else if (model_.expert_shard() && communicator_.world_size() > 1)
    result.grad_norm =
        whole_optimizer_->step(step, result.lr, expert_parallel_gradient_norm(model_.parameters(), communicator_));
  else
    result.grad_norm = whole_optimizer_->step(step, result.lr);
  if (!routing_sums.empty()) update_selection_biases(routing_sums);
  phases->optimizer = now_seconds() - optimizer_start;
  return result;
}

double TrainStep::validation_loss(const BatchSource& loader, int64_t batches) {
  const int world = communicator_.world_size(), rank = communicator_.rank();
  auto evaluate = [&](int64_t count) {
    return evaluate_loss(model_, config_, count, [&](int64_t k, const TensorView& inputs, const TensorView& targets) {
      loader.validation_batch(rank + k * world, inputs, targets);
    });
  };
  if (world == 1) return evaluate(batches);
  if (model_.expert_shard()) return expert_parallel_validation_loss(loader, batches);
  const int64_t mine = batches > rank ? (batches - rank + world - 1) / world : 0;
  double sum = mine == 0 ? 0.0 : evaluate(mine) * static_cast<double>(mine);
  communicator_.all_reduce_sum(&sum, 1);
  return batches > 0 ? sum / static_cast<double>(batches) : 0.0;
}

double TrainStep::expert_parallel_validation_loss(const BatchSource& loader, int64_t batches) {
  const int world = communicator_.world_size(), rank = communicator_.rank();
  const int64_t batch = config_.train.batch_size, seq = config_.train.seq_len;
  Tensor inputs = Tensor::empty({batch, seq}, DType::i32), targets = Tensor::empty({batch, seq}, DType::i32);
  const bool weigh_by_tokens = config_.data.format == "sft";
  double sums[2] = {0, 0};  // weighted losses, weights
  for (int64_t round = 0; round * world < batches; ++round) {
    const int64_t k = rank + round * world;
    loader.validation_batch(k < batches ? k : 0, inputs, targets);
    autograd::Tape tape(model_.precision(), /*recording=*/false);
    const double loss = read_element(model_.loss(tape, inputs, targets, RematPolicy::save_all)->value, 0);
    const double weight = k >= batches      ? 0.0
                          : weigh_by_tokens ? static_cast<double>(count_valid_targets(targets))
                                            : 1.0;
    if (weight == 0) continue;
    sums[0] += weight * loss;
    sums[1] += weight;
  }
  communicator_.all_reduce_sum(sums, 2);
  return sums[1] > 0 ? sums[0] / sums[1] : 0.0;
}

void TrainStep::load_optimizer_state(const LoadedCheckpoint& checkpoint) {
  if (sharded_optimizer_) {
    sharded_optimizer_->load(checkpoint);
  } else if (model_.expert_shard()) {
    LATHE_CHECK(!checkpoint.optimizer.empty(), "cannot resume ", checkpoint.directory,
                " with dist.expert_parallel=true: its optimizer state was written by ZeRO-1 (dist.shard_optimizer); "
                "resume it with the world size and settings that wrote it");
    whole_optimizer_->load_state(slice_expert_moments(checkpoint.optimizer, model_));
  } else {
    whole_optimizer_->load_state(whole_optimizer_state(checkpoint, model_.parameters()));
  }
}

void TrainStep::add_optimizer_state(CheckpointContents& contents, const std::string& checkpoints_dir, int64_t step) {
  if (whole_optimizer_ && model_.expert_shard()) {  // collective: whole expert moments on rank 0
    const std::vector<std::pair<std::string, Tensor>> state = whole_optimizer_->state();
    const std::vector<Parameter>& parameters = model_.parameters();
    for (size_t i = 0; i < state.size(); ++i) {
      const bool local = parameters[i / 2].expert_shard;  // state(): two moments per parameter, in order
      if (local)
        contents.owned.push_back(gather_expert_tensor(communicator_, state[i].second, model_.config().moe_experts));
      if (communicator_.rank() == 0)
        contents.optimizer.emplace_back(state[i].first, local ? contents.owned.back() : state[i].second);
    }
    return;
  }
  if (whole_optimizer_) {
    if (communicator_.rank() == 0)
      for (const auto& [name, tensor] : whole_optimizer_->state()) contents.optimizer.emplace_back(name, tensor);
    return;
  }
  const std::string staging_dir =
      str_cat(checkpoints_dir, "/", checkpoint_directory_name(step), ".shards.tmp.", rank_0_process_id_);
  contents.staged_files = sharded_optimizer_->write_shards(staging_dir, step);
}

std::string TrainStep::describe_communication() const {
  if (!reducer_) return "gradient all-reduce: none (one process)";
  if (steps_run_ == 0) return "gradient all-reduce: no steps run";
  const double steps = static_cast<double>(steps_run_);
  const GradientReductionStats& total = reduction_totals_;
  return str_cat("gradient all-reduce: ", total.buckets / steps_run_, " bucket(s) (",
                 static_cast<double>(total.bytes / steps_run_ / 10000) / 100.0, " MB) per step, ",
                 static_cast<int64_t>(total.communication_seconds / steps * 1e4) / 10.0, " ms per step of which ",
                 static_cast<int64_t>(total.exposed_seconds / steps * 1e4) / 10.0, " ms exposed after backward (",
                 static_cast<int64_t>(100 * total.overlap_fraction()), "% overlapped)");
}

std::string TrainStep::describe_memory() const {
  auto megabytes = [](int64_t bytes) { return str_cat(static_cast<double>(bytes / 10000) / 100.0, " MB"); };
  // The single-process prediction (models/memory_estimate.h) at this rank's micro-batch, with
  // the moments sharded and the all-gather buffer added.
  const TrainingMemoryEstimate single =
      estimate_training_memory(config_.model, share_.micro_batch_rows, config_.train.seq_len, config_.train.remat);
  if (model_.expert_shard()) {
    // This rank's weights (replicated + its experts), their gradients and moments, the single
    // process's activations at this micro-batch, and the all-to-all buffers at balanced routing.
    int64_t stored = 0;
    for (const Parameter& parameter : model_.parameters()) stored += parameter.var->value.numel() * 4;
    const autograd::ExpertExchangeElements exchange = expert_parallel_elements_per_token(config_.model);
    const int64_t tokens = share_.micro_batch_rows * config_.train.seq_len;
    const int64_t exchange_bytes = (exchange.saved + exchange.transient) * tokens * 4;
    return str_cat("expert parallel: weights ", megabytes(stored), " + gradients ", megabytes(stored), " + moments ",
                   megabytes(2 * stored), " per rank (one process: ", megabytes(single.parameter_bytes), " each, ",
                   megabytes(single.optimizer_bytes), " of moments); tensor memory estimate per rank ",
                   megabytes(4 * stored + single.activation_bytes + single.transient_bytes + exchange_bytes),
                   " with all-to-all buffers ", megabytes(exchange_bytes), " (balanced routing)");
  }
  if (!sharded_optimizer_)
    return str_cat("optimizer state replicated (dist.shard_optimizer=false): ", megabytes(single.optimizer_bytes),
                   " per rank; tensor memory estimate per rank ", megabytes(single.total_bytes()));
  TrainingMemoryEstimate rank = single;
  rank.optimizer_bytes = sharded_optimizer_->state_bytes();
  const int64_t per_rank = rank.total_bytes() + sharded_optimizer_->gather_buffer_bytes();
  return str_cat(
      "ZeRO-1: optimizer state ", megabytes(sharded_optimizer_->state_bytes()), " on this rank (1/",
      communicator_.world_size(), " of ", megabytes(single.optimizer_bytes), "); tensor memory estimate per rank ",
      megabytes(per_rank), " (weights ", megabytes(rank.parameter_bytes), " + gradients ",
      megabytes(rank.gradient_bytes), " + moments ", megabytes(rank.optimizer_bytes), " + all-gather buffer ",
      megabytes(sharded_optimizer_->gather_buffer_bytes()), " + activations and scratch ",
      megabytes(rank.activation_bytes + rank.transient_bytes), "; unsharded: ", megabytes(single.total_bytes()), ")");
}

int64_t count_valid_targets(const Tensor& targets) {
  int64_t valid = 0;
  const int32_t* data = targets.ptr<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i) valid += data[i] != kIgnoredTarget ? 1 : 0;
  return valid;
}

std::vector<double> micro_batch_weights(const std::vector<Tensor>& targets) {
  std::vector<double> weights;
  int64_t total = 0;
  for (const Tensor& micro : targets) total += count_valid_targets(micro);
  for (const Tensor& micro : targets)
    weights.push_back(total > 0 ? static_cast<double>(count_valid_targets(micro)) / static_cast<double>(total) : 0.0);
  return weights;
}

double evaluate_loss(const TransformerModel& model, const TrainConfig& config, int64_t batches,
                     const std::function<void(int64_t k, const TensorView&, const TensorView&)>& fill) {
  const int64_t batch = config.train.batch_size, seq = config.train.seq_len;
  Tensor inputs = Tensor::empty({batch, seq}, DType::i32), targets = Tensor::empty({batch, seq}, DType::i32);
  // Text: every target counts, the mean of batch means. SFT: the mean over all valid targets.
  const bool weigh_by_tokens = config.data.format == "sft";
  double total = 0, weight_sum = 0;
  for (int64_t k = 0; k < batches; ++k) {
    fill(k, inputs, targets);
    const double weight = weigh_by_tokens ? static_cast<double>(count_valid_targets(targets)) : 1.0;
    if (weight == 0) continue;
    autograd::Tape tape(model.precision(), /*recording=*/false);
    const autograd::Var loss =
        model.loss(tape, on_device(model.device(), inputs), on_device(model.device(), targets), RematPolicy::save_all);
    total += weight * scalar_value(loss->value);
    weight_sum += weight;
  }
  return weight_sum > 0 ? total / weight_sum : 0.0;
}

}  // namespace lathe
