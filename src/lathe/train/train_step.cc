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
  Tensor inputs = Tensor::empty({batch, seq}, DType::i32), targets = Tensor::empty({batch, seq}, DType::i32);
  model.zero_grads();
  StepResult result;
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const double start = seconds_now();
    next_batch(inputs, targets);
    autograd::Tape tape;
    autograd::Var loss =
        model.loss(tape, inputs, targets, config.train.remat, 1.0f / static_cast<float>(micro_batches));
    const double forward_end = seconds_now();
    tape.backward(loss);
    phases->forward += forward_end - start;
    phases->backward += seconds_now() - forward_end;
    result.loss += read_element(loss->value, 0) / static_cast<double>(micro_batches);
  }
  const double optimizer_start = seconds_now();
  result.lr = learning_rate(config.optimizer, config.train.steps, step);
  result.grad_norm = optimizer.step(step, result.lr);
  phases->optimizer = seconds_now() - optimizer_start;
  return result;
}

double evaluate_loss(const TransformerModel& model, const TrainConfig& config, int64_t batches,
                     const std::function<void(int64_t k, const TensorView&, const TensorView&)>& fill) {
  const int64_t batch = config.train.batch_size, seq = config.train.seq_len;
  Tensor inputs = Tensor::empty({batch, seq}, DType::i32), targets = Tensor::empty({batch, seq}, DType::i32);
  double total = 0;
  for (int64_t k = 0; k < batches; ++k) {
    fill(k, inputs, targets);
    autograd::Tape tape(model.precision(), /*recording=*/false);
    total += read_element(model.loss(tape, inputs, targets, RematPolicy::save_all)->value, 0);
  }
  return batches > 0 ? total / static_cast<double>(batches) : 0.0;
}

}  // namespace lathe
