// run_training for tests: progress output goes to /dev/null (it is not what the tests check and
// would bury their own messages), no signal handlers, and optionally a stop after a given step as
// if the run had been interrupted there.
#pragma once

#include <cstdint>
#include <cstdio>

#include "lathe/train/trainer.h"

namespace lathe {

inline TrainSummary train_quietly(const TrainConfig& config, int64_t stop_after_step = 0) {
  struct NullLog {
    std::FILE* file = std::fopen("/dev/null", "w");
    ~NullLog() { std::fclose(file); }
  } quiet;
  TrainOptions options;
  options.log = quiet.file;
  options.install_signal_handlers = false;
  options.stop_after_step = stop_after_step;
  return run_training(config, options);
}

}  // namespace lathe
