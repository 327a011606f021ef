// One optimizer step of the trainer, shared by `lathe train`, `lathe bench train` and the
// PyTorch comparison test: zero the gradients, forward + backward over grad_accum micro-batches
// (each micro-batch's mean loss weighted 1/grad_accum, so the gradient is that of the mean), then
// clip by the global norm and apply AdamW at the scheduled learning rate.
//
// Masked targets (data.format=sft, kIgnoredTarget = -100 on prompt and padding positions): the
// loss of a micro-batch is the mean over its valid targets (linear_cross_entropy), and with
// grad_accum > 1 the micro-batches are read first and micro-batch i is weighted
// valid_i / sum_j valid_j instead of 1 / grad_accum, so the step's loss and gradient are the mean
// over every valid target of the step, however they fall into micro-batches. (With all targets
// valid, as in text pre-training, the two weightings agree; text keeps 1 / grad_accum.)
#pragma once

#include <functional>
#include <vector>

#include "lathe/models/transformer.h"
#include "lathe/train/optimizer.h"
#include "lathe/train/train_config.h"

namespace lathe {

struct StepResult {
  double loss = 0;       // mean over the micro-batches
  double grad_norm = 0;  // global L2 norm before clipping
  double lr = 0;
};

// Fills one micro-batch: inputs, targets (batch, seq_len) i32.
using NextBatch = std::function<void(const TensorView& inputs, const TensorView& targets)>;

// Wall-clock seconds of a step's phases, summed over its micro-batches (`lathe bench train`).
struct StepPhaseSeconds {
  double forward = 0;    // loss with the tape recording (includes next_batch)
  double backward = 0;   // tape.backward, remat recomputation included
  double optimizer = 0;  // clipping + AdamW
};

// step: 1-based optimizer step (the schedule and AdamW's bias correction use it). `phases`, when
// given, receives the time of each phase.
StepResult train_step(TransformerModel& model, AdamWOptimizer& optimizer, const TrainConfig& config, int64_t step,
                      const NextBatch& next_batch, StepPhaseSeconds* phases = nullptr);

inline constexpr int32_t kIgnoredTarget = -100;      // the loss's ignore_index
int64_t count_valid_targets(const Tensor& targets);  // targets: any shape, i32
// Each micro-batch's share of the valid targets (all 0 when none is valid). targets: (batch, seq) i32 each.
std::vector<double> micro_batch_weights(const std::vector<Tensor>& targets);

// The mean loss over `batches` validation batches (no gradients); with data.format=sft the mean
// over their valid targets (batches without any are skipped). inputs/targets as NextBatch;
// fill(k, inputs, targets) provides batch k.
double evaluate_loss(const TransformerModel& model, const TrainConfig& config, int64_t batches,
                     const std::function<void(int64_t k, const TensorView&, const TensorView&)>& fill);

}  // namespace lathe
