// `lathe train`: the main job. With no arguments it trains the built-in default model on the
// fortune corpus; a config file and key=value overrides change anything. Under mpirun it trains
// data-parallel (train/train_step.h): every rank runs this command.
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/cli/config_arguments.h"
#include "lathe/dist/communicator.h"
#include "lathe/ops/op_profile.h"
#include "lathe/train/memory_check.h"
#include "lathe/train/parallel/data_parallel_run.h"
#include "lathe/train/parallel/expert_parallel_training.h"
#include "lathe/train/trainer.h"

namespace lathe::cli {

int run_train(int argc, char** argv) {
  CommandLine command_line(
      "lathe train [FILE...] [KEY=VALUE...] [options]",
      "Trains a decoder LLM. The config is the built-in default (configs/default.yaml: a ~6M-parameter\n"
      "Llama-style model on the fortune database in /usr/share/games/fortunes), then each FILE (later\n"
      "files win; a file's base_config: other.yaml is read first), then each KEY=VALUE override,\n"
      "e.g. `lathe train data.path=book.txt train.steps=500 run_dir=runs/book`.\n"
      "`lathe config --keys` lists every key. The run directory gets the resolved config, tokenizer,\n"
      "metrics.jsonl, TensorBoard events, checkpoints and loss_curve.svg. A run directory with a\n"
      "checkpoint is resumed from its newest valid one. Ctrl-C saves a checkpoint and stops (exit 130; SIGTERM: 143),\n"
      "as does `touch RUN_DIR/stop` (the way to stop an mpirun run; see the README). One run per run directory.\n"
      "Data parallel: `mpirun -np N lathe train ...` trains on N processes with the same global batch\n"
      "(train.batch_size * train.grad_accum sequences; N must divide it); see the dist.* keys.");
  command_line.positionals("[FILE...] [KEY=VALUE...]", "config files (later ones win), then overrides");
  command_line.option("data", "PATH",
                      "text or JSONL file (.gz/.zst too) or folder to train on (same as data.path=PATH)");
  command_line.option("run-dir", "DIR", "where the run lives (same as run_dir=DIR)");
  command_line.flag(
      "profile", "print the time spent in each library op at the end (steps after the first, which faults memory in)");
  command_line.flag("profile-shapes", "the same, one row per op and shape (e.g. each matmul shape)");
  command_line.flag("quiet", "print only warnings and errors (RUN_DIR/train.log still gets every line)");
  command_line.flag("verbose", "print debug lines too");
  add_runtime_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  if (command_line.has("profile") || command_line.has("profile-shapes")) set_op_profiling(true);
  if (command_line.has("profile-shapes")) set_op_profiling_by_shape(true);

  // Config errors come before MPI starts and are the same on every rank: rank 0 alone reports.
  TrainConfig config;
  std::unique_ptr<Communicator> communicator;
  try {
    require_supported_launcher();  // torchrun and the like: refused before anything else
    ConfigArguments arguments = parse_config_arguments(command_line.positional_values());
    if (command_line.has("data")) arguments.overrides.push_back("data.path=" + command_line.get("data"));
    if (command_line.has("run-dir")) arguments.overrides.push_back("run_dir=" + command_line.get("run-dir"));
    config = load_config(arguments);
    if (world_size_from_environment() > 1)
      plan_data_parallel_share(config.train, rank_from_environment(), world_size_from_environment());
    check_expert_parallel_run(config, world_size_from_environment());
    // Before data preparation and model building (train/memory_check.h).
    check_training_memory(config, world_size_from_environment(), local_world_size_from_environment());
    apply_runtime_options(command_line);
    communicator = make_communicator_from_environment();
  } catch (...) {
    if (rank_from_environment() != 0) {
      // Rank 0 reports the same error. Leaving first would let the launcher (mpirun ends the job
      // when any rank exits non-zero) kill rank 0 before it printed, and the user would see no
      // error at all (seen with 3 ranks on 2 cores): wait for the launcher to end this rank once
      // rank 0 has exited, and leave on our own only if that never comes.
      std::this_thread::sleep_for(std::chrono::seconds(20));
      return 2;
    }
    throw;
  }

  TrainOptions options;
  options.communicator = communicator.get();
  if (command_line.has("quiet")) options.log_level = LogLevel::warning;
  if (command_line.has("verbose")) options.log_level = LogLevel::debug;
  TrainSummary summary;
  if (communicator->world_size() == 1) {
    summary = run_training(config, options);
  } else {
    try {
      summary = run_training(config, options);
    } catch (const std::exception& error) {
      // Another rank may be waiting in a collective for this one: end the whole job.
      end_data_parallel_run_with_error(*communicator, error.what());
    }
  }
  if (!summary.interrupted) return 0;
  // The shell convention for "stopped by signal N" (130 for SIGINT, 143 for SIGTERM), which
  // supervisors use to tell a stop request from a failure.
  const int signal_number = training_stop_signal().load();
  return signal_number > 0 ? 128 + signal_number : 130;
}

}  // namespace lathe::cli
