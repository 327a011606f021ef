#include "lathe/bench/timing.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace lathe {

TimingStats time_runs(const std::function<void()>& run, const TimingOptions& options,
                      const std::function<void()>& before_each) {
  for (int i = 0; i < options.warmup_runs; ++i) {
    if (before_each) before_each();
    run();
  }
  std::vector<double> samples;
  double total = 0;
  while (static_cast<int>(samples.size()) < options.max_runs &&
         (static_cast<int>(samples.size()) < options.min_runs || total < options.min_seconds)) {
    if (before_each) before_each();
    double start = now_seconds();
    run();
    double elapsed = now_seconds() - start;
    samples.push_back(elapsed);
    total += elapsed;
  }
  return timing_stats(std::move(samples));
}

TimingStats timing_stats(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  TimingStats stats;
  stats.runs = static_cast<int>(samples.size());
  stats.min = samples.front();
  stats.median = median(samples);
  stats.p80 = samples[std::min(samples.size() - 1, samples.size() * 4 / 5)];
  double total = 0;
  for (double sample : samples) total += sample;
  stats.mean = total / static_cast<double>(samples.size());
  return stats;
}

TimedRun timed_run(std::function<void()> run, std::function<void()> before_each) {
  return [run = std::move(run), before_each = std::move(before_each)] {
    before_each();
    const double start = now_seconds();
    run();
    return now_seconds() - start;
  };
}

std::vector<InterleavedSamples> time_interleaved_blocks(const std::vector<TimedRun>& paths, int warmup_runs,
                                                        int blocks, int runs_per_block) {
  std::vector<InterleavedSamples> timed(paths.size());
  for (const auto& path : paths)
    for (int i = 0; i < warmup_runs; ++i) path();
  for (int block = 0; block < blocks; ++block) {
    for (size_t p = 0; p < paths.size(); ++p) {
      std::vector<double> block_samples;
      for (int run = 0; run < runs_per_block; ++run) block_samples.push_back(paths[p]());
      timed[p].block_medians.push_back(median(block_samples));
      timed[p].samples.insert(timed[p].samples.end(), block_samples.begin(), block_samples.end());
    }
  }
  return timed;
}

std::vector<double> block_ratios(const InterleavedSamples& numerator, const InterleavedSamples& denominator) {
  const size_t rounds = std::min(numerator.block_medians.size(), denominator.block_medians.size());
  std::vector<double> ratios;
  for (size_t i = 0; i < rounds; ++i)
    if (denominator.block_medians[i] > 0) ratios.push_back(numerator.block_medians[i] / denominator.block_medians[i]);
  return ratios;
}

}  // namespace lathe
