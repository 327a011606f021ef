#include "lathe/core/clock.h"

#include <algorithm>
#include <chrono>

namespace lathe {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double seconds_since(double start) { return now_seconds() - start; }

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  const auto middle = samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2);
  std::nth_element(samples.begin(), middle, samples.end());
  if (samples.size() % 2) return *middle;
  return (*std::max_element(samples.begin(), middle) + *middle) / 2;  // the lower middle: the largest below
}

}  // namespace lathe
