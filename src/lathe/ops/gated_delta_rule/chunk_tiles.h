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

// The backward of a decayed lower-triangular score tile S = tril(A B^T * exp(gamma_i - gamma_j)):
// given dS (n rows of stride ld, lower triangle valid) and S, adds the decay's gradient to
// d_gamma (row minus column sums of dS * S) and turns dS into dS * exp(gamma_i - gamma_j) in
// place (zero above the diagonal), the gradient of A B^T. decay: scratch of ld floats; gamma
// padded with finite values to ld.
inline void decayed_scores_backward(int64_t n, int64_t ld, const float* scores, const float* gamma, float* decay,
                                    float* d_scores, double* d_gamma) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = d_scores + i * ld;
    decay_row(gamma[i], gamma, i + 1, decay);
    for (int64_t j = 0; j <= i; ++j) {
      const float contribution = row[j] * scores[i * ld + j];
      d_gamma[i] += contribution, d_gamma[j] -= contribution;
      row[j] *= decay[j];
    }
    for (int64_t j = i + 1; j < ld; ++j) row[j] = 0.0f;
  }
}

// Rows gated by exp(gamma_i) (the read of the chunk-start state, Gamma_i rows_i . state): with
// product_i = the state-side gradient of row i, adds Gamma_i product_i to d_rows and
// Gamma_i rows_i . product_i to d_gamma[i].
inline void gated_rows_backward(int64_t n, int64_t dim, int64_t ld, const float* rows, const float* product,
                                const float* big_gamma, float* d_rows, double* d_gamma) {
  for (int64_t i = 0; i < n; ++i) {
    d_gamma[i] += big_gamma[i] * dot(rows + i * ld, product + i * ld, dim);
    axpy(big_gamma[i], product + i * ld, d_rows + i * ld, ld);
  }
}

// Rows decayed to the chunk's end by tail_i = exp(gamma_last - gamma_i) (the write into the next
// state): adds tail_i product_i to d_rows, and tail_i rows_i . product_i to d_gamma[last] and
// minus it to d_gamma[i].
inline void tail_rows_backward(int64_t n, int64_t dim, int64_t ld, const float* rows, const float* product,
                               const float* tail, float* d_rows, double* d_gamma) {
  for (int64_t i = 0; i < n; ++i) {
    const float contribution = tail[i] * dot(rows + i * ld, product + i * ld, dim);
    d_gamma[n - 1] += contribution, d_gamma[i] -= contribution;
    axpy(tail[i], product + i * ld, d_rows + i * ld, ld);
  }
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
