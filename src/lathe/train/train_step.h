// One optimizer step of the trainer, shared by `lathe train`, `lathe bench train` and the
// PyTorch comparison test: zero the gradients, forward + backward over grad_accum micro-batches
// (each micro-batch's mean loss weighted 1/grad_accum, so the gradient is that of the mean), then
// clip by the global norm and apply AdamW at the scheduled learning rate.
#pragma once

#include <functional>

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

// The mean loss over `batches` validation batches (no gradients). inputs/targets as NextBatch;
// fill(k, inputs, targets) provides batch k.
double evaluate_loss(const TransformerModel& model, const TrainConfig& config, int64_t batches,
                     const std::function<void(int64_t k, const TensorView&, const TensorView&)>& fill);

}  // namespace lathe
