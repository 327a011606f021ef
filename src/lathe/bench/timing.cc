#include "lathe/bench/timing.h"

#include <algorithm>
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
  std::sort(samples.begin(), samples.end());
  TimingStats stats;
  stats.runs = static_cast<int>(samples.size());
  stats.min = samples.front();
  stats.median = samples[samples.size() / 2];
  stats.p80 = samples[std::min(samples.size() - 1, samples.size() * 4 / 5)];
  stats.mean = total / static_cast<double>(samples.size());
  return stats;
}

}  // namespace lathe
