// Helpers of the chunked linear-recurrence kernels (gated_delta_rule, ssd_scan): products with a
// triangular operand or result on top of attention_tiles::gemm, row dot products and updates, and
// a per-task bump allocator. Included only by kernel files compiled once per ISA
// (lathe_add_isa_kernels): everything lives in namespace lathe::LATHE_ISA_NS::chunk_tiles.
#pragma once

#include <algorithm>
#include <cstdint>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/error.h"
#include "lathe/core/simd.h"
#include "lathe/ops/flash_attention/attention_tiles.h"

namespace lathe::LATHE_ISA_NS::chunk_tiles {

using attention_tiles::gemm;
using attention_tiles::kRows;
using attention_tiles::round_up;
using attention_tiles::W;
using simd::VecF;

// C (rows x vectors*W) (+)= A B with A lower triangular (rows x rows): row block r0 needs depth r0 + kRows.
inline void gemm_lower_a(int64_t rows, int64_t vectors, const float* a, int64_t lda, const float* b, int64_t ldb,
                         float* c, int64_t ldc, bool accumulate) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRows)
    gemm(std::min<int64_t>(kRows, rows - r0), vectors, std::min<int64_t>(rows, r0 + kRows), a + r0 * lda, lda, 1, b,
         ldb, c + r0 * ldc, ldc, accumulate);
}

// The lower triangle (and a little more) of C (rows x rows) = A B: row block r0 computes only the
// vectors that hold columns < r0 + kRows. The rest of each row is left as it was.
inline void gemm_lower_c(int64_t rows, int64_t depth, const float* a, int64_t a_row, int64_t a_col, const float* b,
                         int64_t ldb, float* c, int64_t ldc) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t end = std::min<int64_t>(rows, r0 + kRows);
    gemm(end - r0, (end + W - 1) / W, depth, a + r0 * a_row, a_row, a_col, b, ldb, c + r0 * ldc, ldc, false);
  }
}

inline float dot(const float* a, const float* b, int64_t n) {
  VecF sum = VecF::zero();
  int64_t i = 0;
  for (; i + W <= n; i += W) sum = simd::fma(VecF::load(a + i), VecF::load(b + i), sum);
  float total = sum.reduce_add();
  for (; i < n; ++i) total += a[i] * b[i];
  return total;
}

// y[0 .. n) (+)= factor * x  (n a multiple of W: padded rows)
inline void axpy(float factor, const float* x, float* y, int64_t n) {
  const VecF f = VecF::broadcast(factor);
  for (int64_t i = 0; i < n; i += W) simd::fma(f, VecF::load(x + i), VecF::load(y + i)).store(y + i);
}
inline void scale_copy(float factor, const float* x, float* y, int64_t n) {
  const VecF f = VecF::broadcast(factor);
  for (int64_t i = 0; i < n; i += W) (f * VecF::load(x + i)).store(y + i);
}

// decay[j] = exp(gamma_i - gamma[j]) for j in [0, count), whole vectors (decay holds
// round_up(count, W) floats; gamma is read that far, its padding must be finite).
inline void decay_row(float gamma_i, const float* gamma, int64_t count, float* decay) {
  const VecF top = VecF::broadcast(gamma_i);
  for (int64_t j = 0; j < count; j += W) simd::exp(top - VecF::load(gamma + j)).store(decay + j);
}

// Bump allocator over one zeroed aligned buffer (per task).
class Arena {
 public:
  explicit Arena(int64_t floats)
      : buffer_(sizeof(float) * static_cast<size_t>(floats + 64 * 64), true), capacity_(floats + 64 * 64) {}
  float* take(int64_t floats) {
    float* p = buffer_.as<float>() + used_;
    used_ += round_up(floats, 16);
    LATHE_ASSERT(used_ <= capacity_);
    return p;
  }

 private:
  AlignedBuffer buffer_;
  int64_t capacity_, used_ = 0;
};

}  // namespace lathe::LATHE_ISA_NS::chunk_tiles
