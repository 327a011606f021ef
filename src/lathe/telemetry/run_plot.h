// `lathe plot`: the loss curves of one or more runs in one picture, re-rendered from their
// metrics.jsonl at any time (during a run, after it, or after a crash).
//
// read_run_curves(metrics.jsonl) keeps, per step, the row of the attempt that counts: a resumed
// run appends again from its checkpoint's step, so a step logged twice was redone and the later
// row wins. Each place where logging restarted (the step went back, or the process's
// elapsed_seconds did) is a restart, drawn as a vertical marker at the first step logged after it.
//
// run_plot_svg draws two charts stacked (telemetry/svg_chart.h): the training losses (raw faint,
// moving average solid, one colour per run) with validation losses as points, and below them
// the learning rate of each run, over steps or tokens (x = step x tokens_per_step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/core/json.h"

namespace lathe {

struct RunCurves {
  std::string label;                  // legend name (the run directory)
  std::vector<double> steps, losses;  // training loss per step, ascending steps
  std::vector<double> lr_steps, lrs;  // learning rate per step
  std::vector<double> validation_steps, validation_losses;
  std::vector<double> restart_steps;  // where logging restarted (see above)
  double tokens_per_step = 0;         // global batch x sequence length; 0: unknown
};

// rows: read_metrics_log(path) of one run. Rows without a step are skipped.
RunCurves run_curves_from_metrics(const std::vector<Json>& rows, const std::string& label);

struct RunPlotOptions {
  bool x_tokens = false;  // x axis in tokens (needs every run's tokens_per_step) instead of steps
  bool log_loss = false;  // logarithmic loss axis (else chosen from the data, as the loss curve does)
  std::string title = "loss curves";
};

// Throws lathe::Error when x_tokens is asked for a run without tokens_per_step.
std::string run_plot_svg(const std::vector<RunCurves>& runs, const RunPlotOptions& options);

}  // namespace lathe
