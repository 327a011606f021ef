// Wall-clock timing for benchmarks and the autotuner: warm-up runs, then timed runs until both a
// minimum count and a minimum total time are reached; medians are what we report (machines are
// shared and noisy), with min and p80 beside them.
#pragma once

#include <functional>
#include <vector>

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

// min, median, p80 and mean of some runs' seconds (at least one).
TimingStats timing_stats(std::vector<double> samples);

// One timed run of a path: prepares outside the clock and returns the seconds of one run.
using TimedRun = std::function<double()>;

// A TimedRun of `run`, with `before_each` (untimed) first, e.g. to restore in-place state.
TimedRun timed_run(std::function<void()> run, std::function<void()> before_each);

// What time_interleaved_blocks measured for one path, in order: every run's seconds, and the
// median of each block.
struct InterleavedSamples {
  std::vector<double> samples, block_medians;
};

// Several paths timed in turn so that all see the same machine: `warmup_runs` of each, then
// `blocks` rounds in each of which every path runs `runs_per_block` times in a row (a a a, b b b,
// a a a, b b b, ...). A change in the machine's capacity between rounds (a shared host's
// neighbours) then hits every path alike, where timing one path after the other would credit it
// to whichever ran in the quiet minute. Blocks of several runs keep one library's threads waking
// or spinning down after its block out of most of the next block's runs.
std::vector<InterleavedSamples> time_interleaved_blocks(const std::vector<TimedRun>& paths, int warmup_runs,
                                                        int blocks, int runs_per_block);

// Per round, numerator's block median / denominator's (rounds both have; a zero denominator's
// round left out). Their median is the ratio of two interleaved paths, from which slow drift in
// the machine's speed cancels.
std::vector<double> block_ratios(const InterleavedSamples& numerator, const InterleavedSamples& denominator);

}  // namespace lathe
