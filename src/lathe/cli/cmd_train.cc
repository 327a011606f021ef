// `lathe train`: the main job. With no arguments it trains the built-in default model on the
// fortune corpus; a config file and key=value overrides change anything.
#include <cstdio>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/cli/config_arguments.h"
#include "lathe/ops/op_profile.h"
#include "lathe/train/trainer.h"

namespace lathe::cli {

int run_train(int argc, char** argv) {
  CommandLine command_line(
      "lathe train [FILE] [KEY=VALUE...] [options]",
      "Trains a decoder LLM. The config is the built-in default (configs/default.yaml: a ~6M-parameter\n"
      "Llama-style model on the fortune database in /usr/share/games/fortunes), then FILE, then each\n"
      "KEY=VALUE override, e.g. `lathe train data.path=book.txt train.steps=500 run_dir=runs/book`.\n"
      "`lathe config --keys` lists every key. The run directory gets the resolved config, tokenizer,\n"
      "metrics.jsonl, TensorBoard events, checkpoints and loss_curve.svg. A run directory with a\n"
      "checkpoint is resumed from its newest valid one. Ctrl-C saves a checkpoint and stops (exit 130; SIGTERM: 143).");
  command_line.positionals("[FILE] [KEY=VALUE...]", "config file, then overrides");
  command_line.option("data", "PATH", "text file or folder to train on (same as data.path=PATH)");
  command_line.option("run-dir", "DIR", "where the run lives (same as run_dir=DIR)");
  command_line.flag("profile", "print the time spent in each library op at the end");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  if (command_line.has("profile")) set_op_profiling(true);
  ConfigArguments arguments = parse_config_arguments(command_line.positional_values());
  if (command_line.has("data")) arguments.overrides.push_back("data.path=" + command_line.get("data"));
  if (command_line.has("run-dir")) arguments.overrides.push_back("run_dir=" + command_line.get("run-dir"));
  const TrainConfig config = load_config(arguments);
  apply_runtime_options(command_line);
  const TrainSummary summary = run_training(config);
  if (!summary.interrupted) return 0;
  // The shell convention for "stopped by signal N" (130 for SIGINT, 143 for SIGTERM), which
  // supervisors use to tell a stop request from a failure.
  const int signal_number = training_stop_signal().load();
  return signal_number > 0 ? 128 + signal_number : 130;
}

}  // namespace lathe::cli
