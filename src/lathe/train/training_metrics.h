// Where a run's numbers go (train/trainer.h): the progress line (rank 0's log), metrics.jsonl and
// TensorBoard (rank 0 only; TensorBoard when log.tensorboard) every log.every steps and at the
// last, the validation loss every log.eval_every steps and at the last, and the loss curve
// (loss_curve.svg, from metrics.jsonl) at each of those validations and at the end.
#pragma once

#include <cstdint>
#include <memory>

#include "lathe/core/clock.h"
#include "lathe/train/training_setup.h"

namespace lathe {

class MetricsLog;
class ProgressPrinter;
class TensorBoardWriter;

class TrainingMetrics {
 public:
  explicit TrainingMetrics(TrainingSetup& setup);
  ~TrainingMetrics();

  // After step `step` (1-based) took `seconds`: every log.every steps and at the last, the
  // progress line, a metrics.jsonl row (loss, lr, grad_norm, tokens/s, MFU, elapsed seconds) and
  // the TensorBoard scalars, with tokens/s over the steps since the previous row.
  void after_step(int64_t step, const StepResult& result, double seconds);
  // Collective: every log.eval_every steps and at the last, the validation loss (when the data has
  // validation batches): a line, a metrics.jsonl row and a TensorBoard scalar; then (rank 0, before
  // the last step) loss_curve.svg is redrawn.
  void validate_if_due(int64_t step);
  // Ends the progress line and closes TensorBoard; a run that trained writes loss_curve.svg (rank 0).
  void finish(int64_t last_step);

  double tokens_per_second() const { return tokens_per_second_; }  // of the last row
  double mfu() const { return mfu_; }
  double validation_loss() const { return validation_loss_; }  // the last, NaN without validation data
  double step_seconds() const { return total_step_seconds_; }  // all steps of this process

 private:
  TrainingSetup& setup_;
  std::unique_ptr<MetricsLog> metrics_;             // rank 0
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0, log.tensorboard
  std::unique_ptr<ProgressPrinter> progress_;
  double start_ = now_seconds();
  double window_seconds_ = 0, window_tokens_ = 0, total_step_seconds_ = 0;
  double tokens_per_second_ = 0, mfu_ = 0, validation_loss_ = 0;
  bool mfu_cap_noted_ = false;  // the note that MFU was capped at 100% is printed once
};

}  // namespace lathe
