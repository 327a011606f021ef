// Counter-based random numbers (Philox4x32-10). Element i of a stream depends only on
// (seed, stream, i), never on which thread computes it or in what order, so tensors filled in
// parallel are identical for every thread count.
#pragma once

#include <array>
#include <cstdint>

#include "lathe/core/tensor.h"

namespace lathe {

// The Philox4x32 block for a 128-bit counter (counter_low, counter_high) and a 64-bit key.
std::array<uint32_t, 4> philox4x32(uint64_t counter_low, uint64_t counter_high, uint64_t key);

// Uniform in [0, 1) and standard normal values for element `index` of stream `stream`.
double uniform_at(uint64_t seed, uint64_t stream, uint64_t index);
double normal_at(uint64_t seed, uint64_t stream, uint64_t index);

// Fill a tensor (row-major element order) with uniform [low, high) or normal(mean, std) values,
// rounded to its dtype. Integer dtypes receive floor(uniform).
void fill_uniform(const TensorView& view, uint64_t seed, double low, double high, uint64_t stream = 0);
void fill_normal(const TensorView& view, uint64_t seed, double mean, double std, uint64_t stream = 0);

}  // namespace lathe
