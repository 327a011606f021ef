#include "lathe/train/train_step.h"

#include "lathe/train/lr_schedule.h"

namespace lathe {

StepResult train_step(TransformerModel& model, AdamWOptimizer& optimizer, const TrainConfig& config, int64_t step,
                      const NextBatch& next_batch) {
  const int64_t batch = config.train.batch_size, seq = config.train.seq_len, micro_batches = config.train.grad_accum;
  Tensor inputs = Tensor::empty({batch, seq}, DType::i32), targets = Tensor::empty({batch, seq}, DType::i32);
  model.zero_grads();
  StepResult result;
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    next_batch(inputs, targets);
    autograd::Tape tape;
    autograd::Var loss =
        model.loss(tape, inputs, targets, config.train.remat, 1.0f / static_cast<float>(micro_batches));
    tape.backward(loss);
    result.loss += read_element(loss->value, 0) / static_cast<double>(micro_batches);
  }
  result.lr = learning_rate(config.optimizer, config.train.steps, step);
  result.grad_norm = optimizer.step(step, result.lr);
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
