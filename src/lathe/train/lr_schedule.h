// Learning-rate schedules, all after a linear warm-up (step is 1-based, steps the total):
//   warm-up    step <= warmup_steps:  lr * step / warmup_steps
//   constant   lr
//   cosine     lr_min + (lr - lr_min) * (1 + cos(pi * p)) / 2,  p = (step - warmup) / (steps - warmup)
//   wsd        (warmup-stable-decay) lr until the last round(decay_steps_fraction * steps) steps, then
//              linearly down to lr_min at step == steps
// with lr_min = lr * min_lr_ratio.
#pragma once

#include <cstdint>

#include "lathe/train/train_config.h"

namespace lathe {

double learning_rate(const OptimizerSection& optimizer, int64_t total_steps, int64_t step);

}  // namespace lathe
