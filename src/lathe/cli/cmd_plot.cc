// `lathe plot RUN...`: re-renders and overlays the loss curves of runs from their metrics.jsonl
// (telemetry/run_plot.h), with each run's learning rate below and its restarts marked.
#include <cstdio>
#include <filesystem>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/io/durable_file.h"
#include "lathe/telemetry/metrics_log.h"
#include "lathe/telemetry/run_plot.h"
#include "lathe/train/train_config.h"

namespace lathe::cli {
namespace fs = std::filesystem;

namespace {

// A run directory's curves, with its tokens per step from its resolved config.yaml.
RunCurves read_run(const std::string& run_dir) {
  const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
  std::error_code error;
  LATHE_CHECK(fs::is_directory(run_dir, error), "'", run_dir, "' is not a run directory");
  LATHE_CHECK(fs::is_regular_file(metrics, error), run_dir, " has no metrics.jsonl (not a `lathe train` run, or ",
              "it has not logged a step yet)");
  RunCurves curves = run_curves_from_metrics(read_metrics_log(metrics.string()), run_dir);
  const fs::path config_path = fs::path(run_dir) / "config.yaml";
  if (fs::is_regular_file(config_path, error)) {
    const TrainConfig config = train_config_from_yaml(read_file_contents(config_path.string()), config_path.string());
    curves.tokens_per_step =
        static_cast<double>(config.train.batch_size * config.train.grad_accum * config.train.seq_len);
  }
  return curves;
}

}  // namespace

int run_plot(int argc, char** argv) {
  CommandLine command_line(
      "lathe plot RUN_DIR... [--x steps|tokens] [--log] [--out FILE] [--title TEXT]",
      "Draws the loss curves of one or more runs in one SVG, read again from each RUN_DIR/metrics.jsonl\n"
      "(so it works during a run and after a crash): training loss (raw faint, moving average solid)\n"
      "and validation points, one colour per run, the learning rate below, and a grey line where a\n"
      "run restarted from a checkpoint. Steps a restart redid count once (the later attempt's).");
  command_line.positionals("RUN_DIR...", "run directories of `lathe train` or `lathe launch`");
  command_line.option("x", "steps|tokens", "x axis: optimizer steps, or tokens seen (steps x global batch x seq_len)",
                      "steps");
  command_line.flag("log", "logarithmic loss axis (default: chosen from the data)");
  command_line.option("out", "FILE", "the SVG to write", "loss_curves.svg");
  command_line.option("title", "TEXT", "the chart's title", "loss curves");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  const auto& run_dirs = command_line.positional_values();
  LATHE_CHECK(!run_dirs.empty(), "give at least one RUN_DIR (see --help)");
  const std::string x = command_line.get("x");
  LATHE_CHECK(x == "steps" || x == "tokens", "--x: expected steps or tokens, got '", x, "'");
  std::vector<RunCurves> runs;
  for (const std::string& run_dir : run_dirs) runs.push_back(read_run(run_dir));
  RunPlotOptions options;
  options.x_tokens = x == "tokens";
  options.log_loss = command_line.has("log");
  options.title = command_line.get("title");
  const std::string out = command_line.get("out");
  write_file_atomically(out, run_plot_svg(runs, options));
  std::printf("wrote %s (%zu run(s))\n", out.c_str(), runs.size());
  return 0;
}

}  // namespace lathe::cli
