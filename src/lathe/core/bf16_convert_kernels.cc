// f32 <-> bf16 span kernels, compiled once per ISA (scalar, avx2, avx512; see bf16_convert.h).
// The rounding is VecF's to_bf16_bits (simd.h), the same rule as half.h's float_to_bf16: the
// baseline build of that scalar function (SSE2: eight values per 45 instructions of shuffles)
// converted 1M floats in 0.35-0.50 ms on one Zen 4 thread, the AVX2 and AVX-512 loops in 0.10-0.16.
#include <cstdint>

#include "lathe/core/simd.h"

namespace lathe::LATHE_ISA_NS {

using simd::VecF;

void f32_to_bf16_span(const float* source, uint16_t* dest, int64_t n) {
  int64_t i = 0;
  for (; i + 2 * VecF::width <= n; i += 2 * VecF::width) {
    VecF::load(source + i).store_bf16(dest + i);
    VecF::load(source + i + VecF::width).store_bf16(dest + i + VecF::width);
  }
  for (; i < n; i += VecF::width) simd::store_row(dest + i, simd::load_row(source + i, n - i), n - i);
}

void bf16_to_f32_span(const uint16_t* source, float* dest, int64_t n) {
  int64_t i = 0;
  for (; i + 2 * VecF::width <= n; i += 2 * VecF::width) {
    VecF::load_bf16(source + i).store(dest + i);
    VecF::load_bf16(source + i + VecF::width).store(dest + i + VecF::width);
  }
  for (; i < n; i += VecF::width) simd::store_row(dest + i, simd::load_row(source + i, n - i), n - i);
}

}  // namespace lathe::LATHE_ISA_NS
