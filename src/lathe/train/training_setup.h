// Everything a run needs before its first step (train/trainer.h), in the order a run makes it:
// the validated config, threads and compute dtype, the run directory (rank 0 locks it: a second
// run on it is refused, naming the holder's pid) and its goodput event log,
// the data (rank 0 builds the token cache first), the model and its TrainStep (optimizer included),
// then the resume from the newest valid checkpoint (or load_from=hf:DIR / a fresh start), the
// run's tokenizer.json and config.yaml (rank 0), and the machine's peaks for MFU.
//
// Collective under data parallelism: every rank builds its setup with the same config.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "lathe/data/batch_source.h"
#include "lathe/dist/communicator.h"
#include "lathe/io/run_directory_lock.h"
#include "lathe/models/transformer.h"
#include "lathe/telemetry/goodput_events.h"
#include "lathe/train/compute_dtype.h"
#include "lathe/train/train_config.h"
#include "lathe/train/train_step.h"
#include "lathe/train/trainer.h"

namespace lathe {

struct TrainingSetup {
  const TrainConfig* config = nullptr;
  std::unique_ptr<SingleProcessCommunicator> single_process;  // when options.communicator is null
  std::unique_ptr<Communicator> gpu_communicator;  // NCCL over options.communicator (a GPU data-parallel run)
  Communicator* communicator = nullptr;            // the run's: gpu_communicator when set
  bool lead = true;                                // rank 0: writes the run directory and prints
  std::FILE* log = nullptr;      // run_log's stream on rank 0 once the run directory is locked, discarded elsewhere
  std::FILE* console = nullptr;  // options.log on rank 0 (where progress redraws its line), else null
  LogLevel console_level = LogLevel::info;
  std::unique_ptr<RunLog> run_log;  // rank 0: lines to the console, timestamped and levelled in RUN_DIR/train.log
  std::string run_dir, checkpoints_dir;
  RunDirectoryLock run_dir_lock;  // rank 0: one writer per run directory (io/run_directory_lock.h)
  std::string config_yaml;        // the resolved config (config.yaml, checkpoints, TensorBoard)
  ComputeDtype compute_dtype = ComputeDtype::f32;
  std::unique_ptr<TrainingEvents> events;  // goodput event log and supervisor heartbeat
  TrainingData data;
  std::unique_ptr<TransformerModel> model;
  std::unique_ptr<TrainStep> step;
  int64_t first_step = 0;  // 0 for a fresh run, the checkpoint's step when resumed
  // For tokens/s and MFU.
  int64_t tokens_per_step = 0;  // the global batch's tokens
  double flops_per_token = 0;
  double peak_gflops = 0;  // of the arithmetic the matmuls use, all ranks together

  bool distributed() const { return communicator->world_size() > 1; }
  BatchSource& loader() const { return *data.batches; }
};

// Throws lathe::Error (the same on every rank) for a bad config, unusable data, a refused resume
// (another model, only damaged checkpoints) and unreadable files.
TrainingSetup set_up_training(const TrainConfig& config, const TrainOptions& options);

// The selected GPU's datasheet rates (cuda_runtime.h) as the peaks MFU on it counts: f32, and bf16
// on tensor cores (in bf16_gflops). Needs a usable device.
MachinePeaks gpu_datasheet_peaks();

}  // namespace lathe
