#include "lathe/train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace lathe {

double learning_rate(const OptimizerSection& optimizer, int64_t total_steps, int64_t step) {
  const double peak = optimizer.lr, floor = optimizer.lr * optimizer.min_lr_ratio;
  const int64_t warmup = optimizer.warmup_steps;
  if (warmup > 0 && step <= warmup) return peak * static_cast<double>(step) / static_cast<double>(warmup);
  switch (optimizer.schedule) {
    case LrSchedule::constant:
      return peak;
    case LrSchedule::cosine: {
      const double span = static_cast<double>(std::max<int64_t>(total_steps - warmup, 1));
      const double progress = std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
      return floor + (peak - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
    case LrSchedule::wsd: {
      const int64_t decay_steps = std::llround(optimizer.decay_steps_fraction * static_cast<double>(total_steps));
      const int64_t decay_start = total_steps - decay_steps;
      if (decay_steps <= 0 || step <= decay_start) return peak;
      const double progress = std::min(1.0, static_cast<double>(step - decay_start) / static_cast<double>(decay_steps));
      return peak + (floor - peak) * progress;
    }
  }
  return peak;
}

}  // namespace lathe
