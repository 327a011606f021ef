#include "lathe/train/train_step.h"

#include <chrono>

#include "lathe/train/lr_schedule.h"

namespace lathe {

static double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

StepResult train_step(TransformerModel& model, AdamWOptimizer& optimizer, const TrainConfig& config, int64_t step,
                      const NextBatch& next_batch, StepPhaseSeconds* phases) {
  StepPhaseSeconds local_phases;
  if (!phases) phases = &local_phases;
  *phases = {};
  const int64_t batch = config.train.batch_size, seq = config.train.seq_len, micro_batches = config.train.grad_accum;
  // Masked targets (SFT) leave micro-batches with different numbers of valid tokens: all are read
  // first and each is weighted by its share of the step's valid tokens (see micro_batch_weights).
  const bool weigh_by_tokens = config.data.format == "sft" && micro_batches > 1;
  std::vector<Tensor> inputs(weigh_by_tokens ? micro_batches : 1), targets(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i] = Tensor::empty({batch, seq}, DType::i32);
    targets[i] = Tensor::empty({batch, seq}, DType::i32);
  }
  std::vector<double> weights(static_cast<size_t>(micro_batches), 0.0);
  if (weigh_by_tokens) {
    const double start = seconds_now();
    for (int64_t micro = 0; micro < micro_batches; ++micro)
      next_batch(inputs[static_cast<size_t>(micro)], targets[static_cast<size_t>(micro)]);
    weights = micro_batch_weights(targets);
    phases->forward += seconds_now() - start;
  }
  model.zero_grads();
  StepResult result;
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const double start = seconds_now();
    const size_t slot = weigh_by_tokens ? static_cast<size_t>(micro) : 0;
    if (!weigh_by_tokens) next_batch(inputs[slot], targets[slot]);
    const double weight = weights[static_cast<size_t>(micro)];
    autograd::Tape tape;
    autograd::Var loss =
        model.loss(tape, inputs[slot], targets[slot], config.train.remat,
                   weigh_by_tokens ? static_cast<float>(weight) : 1.0f / static_cast<float>(micro_batches));
    const double forward_end = seconds_now();
    tape.backward(loss);
    phases->forward += forward_end - start;
    phases->backward += seconds_now() - forward_end;
    const double micro_loss = read_element(loss->value, 0);
    result.loss += weigh_by_tokens ? micro_loss * weight : micro_loss / static_cast<double>(micro_batches);
  }
  const double optimizer_start = seconds_now();
  result.lr = learning_rate(config.optimizer, config.train.steps, step);
  result.grad_norm = optimizer.step(step, result.lr);
  phases->optimizer = seconds_now() - optimizer_start;
  return result;
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
    total += weight * read_element(model.loss(tape, inputs, targets, RematPolicy::save_all)->value, 0);
    weight_sum += weight;
  }
  return weight_sum > 0 ? total / weight_sum : 0.0;
}

}  // namespace lathe
