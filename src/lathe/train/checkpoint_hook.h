// When a run saves checkpoints (train/trainer.h): every checkpoint.every steps, at the last step,
// and when the run stops early - SIGINT/SIGTERM (handlers installed for the hook's lifetime when
// TrainOptions::install_signal_handlers), a stop file or a vanished supervisor under `lathe launch`
// (train/external_stop.h, watched for the hook's lifetime) or TrainOptions::stop_after_step. Rank 0 writes them with
// a CheckpointManager (train/checkpoint.h: asynchronous, the newest checkpoint.keep_last kept);
// the optimizer state comes from the TrainStep (collective: ZeRO-1 shards are staged by every rank).
//
// Test-only: LATHE_TEST_CHECKPOINT_FILE_DELAY_MS=N makes the writer sleep N ms before each file.
#pragma once

#include <cstdint>
#include <memory>

#include "lathe/train/checkpoint.h"
#include "lathe/train/external_stop.h"
#include "lathe/train/training_setup.h"

namespace lathe {

class CheckpointHook {
 public:
  CheckpointHook(TrainingSetup& setup, const TrainOptions& options);
  ~CheckpointHook();  // restores the default signal handlers
  CheckpointHook(const CheckpointHook&) = delete;
  CheckpointHook& operator=(const CheckpointHook&) = delete;

  // Collective, after step `step` (1-based): whether the run stops now (a signal reached any rank,
  // or stop_after_step); saves a checkpoint when one is due or the run stops.
  bool after_step(int64_t step);
  // Waits for the last checkpoint to be on disk.
  void finish(int64_t last_step);
  CheckpointSaveStats last_stats() const;

 private:
  void save(int64_t step);

  TrainingSetup& setup_;
  int64_t stop_after_step_ = 0;
  std::unique_ptr<CheckpointManager> manager_;  // rank 0
  std::unique_ptr<ExternalStopWatcher> external_stop_;
};

}  // namespace lathe
