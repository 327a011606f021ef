// Wall-clock timing for benchmarks and the autotuner: warm-up runs, then timed runs until both a
// minimum count and a minimum total time are reached; medians are what we report (machines are
// shared and noisy), with min and p80 beside them.
#pragma once

#include <functional>

#include "lathe/core/clock.h"  // now_seconds

namespace lathe {

struct TimingOptions {
  int warmup_runs = 2;
  int min_runs = 10;
  int max_runs = 1000;
  double min_seconds = 0.3;  // keep timing until this much time was spent (after min_runs)
};

struct TimingStats {
  double median = 0, min = 0, p80 = 0, mean = 0;  // seconds
  int runs = 0;
};

// `before_each` (untimed) runs before every run, e.g. to restore in-place state.
TimingStats time_runs(const std::function<void()>& run, const TimingOptions& options = {},
                      const std::function<void()>& before_each = nullptr);

}  // namespace lathe
