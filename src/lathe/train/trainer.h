// `lathe train`: a whole training run from a validated TrainConfig.
//
// Run directory (config.run_dir), self-describing:
//   config.yaml          the resolved config of the run
//   tokenizer.json       the tokenizer the run trained or was given
//   data/                cached token shards (unless data.cache_dir points elsewhere)
//   metrics.jsonl        one row per logged step and per validation
//   tensorboard/         TensorBoard event files (loss, lr, grad norm, tokens/s, MFU, val loss)
//   checkpoints/         step_XXXXXXXX/ directories (train/checkpoint.h), the newest keep_last
//   loss_curve.svg       redrawn at every validation (log.eval_every) and at the end (and on interruption)
// A run directory holding a valid checkpoint is resumed from its newest one; the model section of
// its config must match. SIGINT/SIGTERM finish the current step, save a checkpoint and return.
//
// The run is a short loop over its parts: the setup (train/training_setup.h: run directory,
// config, data, model, TrainStep with its optimizer, resume), the step (train/train_step.h), the
// metrics sink (train/training_metrics.h: progress line, metrics.jsonl, TensorBoard, validation,
// loss curve) and the checkpoint hook (train/checkpoint_hook.h: periodic and signal-triggered
// asynchronous checkpoints).
//
// Data parallelism: with a communicator of world size N > 1 (cmd_train makes one under mpirun),
// every rank runs run_training with the same config; each trains its share of every global batch
// (train/train_step.h, train/parallel/). Rank 0 alone writes the run directory (config, tokenizer, metrics,
// TensorBoard, checkpoints, curve) and prints progress; the other ranks print nothing. Errors
// before the first step are the same on every rank (same config, same files): each rank throws.
// An error during training, which may hit one rank only while the others wait in a collective, is
// printed with its rank and ends the whole job (Communicator::abort, exit code 2).
//
// Test-only: the environment variable LATHE_TEST_CHECKPOINT_FILE_DELAY_MS=N makes the checkpoint
// writer sleep N ms before each file it writes, so tests/integration can SIGKILL a run while a
// checkpoint is surely half written. Never set it for real runs.
#pragma once

#include <atomic>
#include <cstdio>
#include <string>

#include "lathe/dist/communicator.h"
#include "lathe/telemetry/run_log.h"
#include "lathe/train/train_config.h"

namespace lathe {

struct TrainOptions {
  std::FILE* log = stdout;               // progress and notes (a timestamped, levelled copy in RUN_DIR/train.log)
  LogLevel log_level = LogLevel::info;   // the lowest level printed to `log` (--verbose: debug, --quiet: warning)
  bool install_signal_handlers = true;   // SIGINT/SIGTERM -> checkpoint and stop
  int64_t stop_after_step = 0;           // > 0: behave as if interrupted after this step (tests)
  Communicator* communicator = nullptr;  // null or world size 1: a single-process run
};

struct TrainSummary {
  int64_t first_step = 0;  // 0 for a fresh run, the checkpoint's step when resumed
  int64_t last_step = 0;
  bool interrupted = false;
  double final_train_loss = 0;
  double final_val_loss = 0;  // NaN when the run has no validation data
  double tokens_per_second = 0;
  double mfu = 0;  // fraction of the measured f32 FMA peak (bf16 runs: the bf16 dot-product peak)
  std::string run_dir;
};

TrainSummary run_training(const TrainConfig& config, const TrainOptions& options = {});

// Set by the signal handlers (and tests): the run stops after the current step.
std::atomic<int>& training_stop_signal();

}  // namespace lathe
