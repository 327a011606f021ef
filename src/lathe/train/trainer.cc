#include "lathe/train/trainer.h"

#include <cmath>

#include "lathe/core/clock.h"
#include "lathe/ops/op_profile.h"
#include "lathe/telemetry/progress.h"
#include "lathe/train/checkpoint_hook.h"
#include "lathe/train/training_metrics.h"
#include "lathe/train/training_setup.h"

namespace lathe {
TrainSummary run_training(const TrainConfig& config, const TrainOptions& options) {
  TrainingSetup setup = set_up_training(config, options);
  TrainingMetrics metrics(setup);
  CheckpointHook checkpoints(setup, options);
  TrainingEvents& events = *setup.events;
  std::FILE* log = setup.log;
  if (setup.first_step >= config.train.steps)
    std::fprintf(
        log, "the run is already at step %lld of train.steps=%lld: nothing to train (raise train.steps to continue)\n",
        static_cast<long long>(setup.first_step), static_cast<long long>(config.train.steps));

  const double run_start = now_seconds();
  events.training_begins();
  if (setup.run_log) setup.run_log->open_file(setup.run_dir + "/train.log");
  TrainSummary summary;
  summary.run_dir = setup.run_dir;
  summary.first_step = setup.first_step;
  int64_t step = setup.first_step;
  StepResult last{};
  bool first_step_left_out = false;   // by the op profile (see below)
  double seconds_before_profile = 0;  // step time before the profile's first step
  while (step < config.train.steps) {
    // The op profile leaves out this process's first step when more follow: its ops fault the
    // step's memory in (each output's first touch), which made a 91M model's forward GEMMs look a
    // third slower than the backward's in a 4-step profile (docs/perf.md); steady steps are what
    // the table is read for.
    if (op_profiling_enabled() && step == setup.first_step + 1) {
      reset_op_profile();
      first_step_left_out = true;
      seconds_before_profile = metrics.step_seconds();
    }
    const double step_start = now_seconds();
    const double step_event_start = events.now();
    const int64_t first_sample = setup.loader().samples_consumed();
    StepPhaseSeconds phases;
    last = setup.step->run(step + 1, setup.loader(), &phases);
    events.add_data_seconds(phases.data);
    ++step;
    LATHE_CHECK(std::isfinite(last.loss), "training diverged at step ", step, ": loss is ", last.loss,
                " (try a lower optimizer.lr); the last checkpoint is kept");
    metrics.after_step(step, last, seconds_since(step_start));
    metrics.validate_if_due(step);
    summary.interrupted = checkpoints.after_step(step);
    events.step_done(step_event_start, step, first_sample);  // the whole iteration: logging included
    if (summary.interrupted) break;
  }
  metrics.finish(step);
  checkpoints.finish(step);

  summary.last_step = step;
  summary.final_train_loss = last.loss;
  summary.final_val_loss = metrics.validation_loss();
  summary.tokens_per_second = metrics.tokens_per_second();
  summary.mfu = metrics.mfu();
  const CheckpointSaveStats stats = checkpoints.last_stats();
  if (summary.interrupted)
    std::fprintf(log, "stopped at step %lld: checkpoint saved in %s; run the same command again to resume\n",
                 static_cast<long long>(step), setup.checkpoints_dir.c_str());
  else
    std::fprintf(log, "done: %lld steps in %s; last checkpoint %s (%.1f MB, written in %.2f s)\n",
                 static_cast<long long>(step - summary.first_step), format_duration(seconds_since(run_start)).c_str(),
                 checkpoint_directory_name(step).c_str(), static_cast<double>(stats.bytes) / 1e6, stats.write_seconds);
  if (setup.distributed()) std::fprintf(log, "%s\n", setup.step->describe_communication().c_str());
  events.finished(summary.interrupted);
  if (op_profiling_enabled() && step > summary.first_step) {
    const double profiled_seconds = metrics.step_seconds() - seconds_before_profile;
    const int64_t profiled_first_step = summary.first_step + (first_step_left_out ? 2 : 1);
    const std::string steps =
        profiled_first_step == step ? str_cat("step ", step) : str_cat("steps ", profiled_first_step, "-", step);
    const std::string left_out = first_step_left_out
                                     ? str_cat("; step ", summary.first_step + 1, ", which faults memory in, left out")
                                     : std::string();
    std::fprintf(log, "time by op over %s (%.2f s of steps%s):\n%s", steps.c_str(), profiled_seconds, left_out.c_str(),
                 format_op_profile(op_profile(), profiled_seconds).c_str());
  }
  return summary;
}

}  // namespace lathe
