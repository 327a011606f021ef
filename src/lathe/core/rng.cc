#include "lathe/core/rng.h"

#include <cmath>

#include "lathe/core/parallel.h"

namespace lathe {

std::array<uint32_t, 4> philox4x32(uint64_t counter_low, uint64_t counter_high, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(counter_low), c1 = static_cast<uint32_t>(counter_low >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_high), c3 = static_cast<uint32_t>(counter_high >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t product0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t product1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t next0 = static_cast<uint32_t>(product1 >> 32) ^ c1 ^ k0;
    uint32_t next1 = static_cast<uint32_t>(product1);
    uint32_t next2 = static_cast<uint32_t>(product0 >> 32) ^ c3 ^ k1;
    uint32_t next3 = static_cast<uint32_t>(product0);
    c0 = next0, c1 = next1, c2 = next2, c3 = next3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

double uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
  auto block = philox4x32(index, stream, seed);
  uint64_t bits53 = ((static_cast<uint64_t>(block[0]) << 32) | block[1]) >> 11;
  return static_cast<double>(bits53) * 0x1.0p-53;
}

double normal_at(uint64_t seed, uint64_t stream, uint64_t index) {
  auto block = philox4x32(index, stream, seed);
  // Box-Muller on two 32-bit uniforms; u1 in (0, 1] avoids log(0).
  double u1 = (static_cast<double>(block[2]) + 1.0) * 0x1.0p-32;
  double u2 = static_cast<double>(block[3]) * 0x1.0p-32;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Element i gets generate(i), rounded to the view's dtype. Contiguous tensors of any dtype are
// filled in parallel (as a flat view, so each write is a direct index); the result is the same
// either way because generate(i) depends only on i.
template <class Generate>
static void fill_with(const TensorView& view, Generate&& generate) {
  int64_t count = view.numel();
  if (!view.is_contiguous()) {
    for (int64_t i = 0; i < count; ++i) write_element(view, i, generate(i));
    return;
  }
  TensorView flat = view.reshape({count});
  parallel_for(count, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) write_element(flat, i, generate(i));
  });
}

void fill_uniform(const TensorView& view, uint64_t seed, double low, double high, uint64_t stream) {
  bool integral = !is_floating(view.dtype);
  fill_with(view, [&](int64_t i) {
    double value = low + (high - low) * uniform_at(seed, stream, static_cast<uint64_t>(i));
    return integral ? std::floor(value) : value;
  });
}

void fill_normal(const TensorView& view, uint64_t seed, double mean, double std, uint64_t stream) {
  fill_with(view, [&](int64_t i) { return mean + std * normal_at(seed, stream, static_cast<uint64_t>(i)); });
}

}  // namespace lathe
