// Helpers of the chunked linear-recurrence kernels (gated_delta_rule, ssd_scan): products with a
// triangular operand or result on top of attention_tiles::gemm, row dot products and updates, and
// attention_tiles' per-task bump allocator (Arena). Included only by kernel files compiled once per ISA
// (lathe_add_isa_kernels): everything lives in namespace lathe::LATHE_ISA_NS::chunk_tiles.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/error.h"
#include "lathe/core/simd.h"
#include "lathe/ops/flash_attention/attention_tiles.h"

namespace lathe::LATHE_ISA_NS::chunk_tiles {

using attention_tiles::Arena;
using attention_tiles::gemm;
using attention_tiles::kRows;
using attention_tiles::round_up;
using attention_tiles::transpose_padded;
using attention_tiles::W;
using simd::VecF;

// C (rows x vectors*W) (+)= A B with A lower triangular (rows x rows): row block r0 needs depth r0 + kRows.
inline void gemm_lower_a(int64_t rows, int64_t vectors, const float* a, int64_t lda, const float* b, int64_t ldb,
                         float* c, int64_t ldc, bool accumulate) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRows)
    gemm(std::min<int64_t>(kRows, rows - r0), vectors, std::min<int64_t>(rows, r0 + kRows), a + r0 * lda, lda, 1, b,
         ldb, c + r0 * ldc, ldc, accumulate);
}

// C (rows x vectors*W) (+)= A^T B with A lower triangular (rows x rows, row stride lda, zero above
// the diagonal): row i of A^T is zero before column i, so row block r0 starts its depth at r0.
inline void gemm_lower_transposed_a(int64_t rows, int64_t vectors, const float* a, int64_t lda, const float* b,
                                    int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRows)
    gemm(std::min<int64_t>(kRows, rows - r0), vectors, rows - r0, a + r0 * lda + r0, 1, lda, b + r0 * ldb, ldb,
         c + r0 * ldc, ldc, accumulate);
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

// A chunk's cumulative log-decay gamma_i (a sum of up to 256 negative steps, |gamma| up to ~100)
// is summed in double and kept as two floats, high (the sum rounded) and low (what rounding
// lost). A pair's decay exp(gamma_i - gamma_j) then sees the difference to float precision:
// from high alone it was off by up to ulp(|gamma|) (8e-6 at |gamma| = 100), a 1e-6 error in y
// next to the token recurrence's 1e-7 (a contract failure at rare seeds).
inline void split_gamma(double gamma, float& high, float& low) {
  high = static_cast<float>(gamma);
  low = static_cast<float>(gamma - static_cast<double>(high));
}
inline float gamma_difference(const float* high, const float* low, int64_t i, int64_t j) {
  return (high[i] - high[j]) + (low[i] - low[j]);
}

// decay[j] = exp(gamma_i - gamma_j) for j in [0, count), whole vectors (decay holds
// round_up(count, W) floats; high and low are read that far, their padding must be finite).
inline void decay_row(const float* high, const float* low, int64_t i, int64_t count, float* decay) {
  const VecF top_high = VecF::broadcast(high[i]), top_low = VecF::broadcast(low[i]);
  for (int64_t j = 0; j < count; j += W)
    simd::exp((top_high - VecF::load(high + j)) + (top_low - VecF::load(low + j))).store(decay + j);
}

// The backward of a decayed lower-triangular score tile S = tril(A B^T * exp(gamma_i - gamma_j)):
// given dS (n rows of stride ld, lower triangle valid) and S, adds the decay's gradient to
// d_gamma (row minus column sums of dS * S) and turns dS into dS * exp(gamma_i - gamma_j) in
// place (zero above the diagonal), the gradient of A B^T. decay: scratch of ld floats; gamma
// (high and low, as decay_row reads them) padded with finite values to ld (ld <= 256, a multiple of W).
// Vectorised along each row; the products dS * S are float, their row and column sums double.
// Why double: the caller's reverse cumulative sum of d_gamma cancels every pair of tokens on the
// same side of a split exactly (a pair adds to its row and subtracts from its column), and that
// cancellation survives only if both sums are near exact. Plain float sums over 128-token chunks
// missed the contract tolerance on one seed in ten; Kahan-compensated float sums, whose error is
// still ~2 ulps of the sum of |terms|, on ssd_scan_backward's dA at about one seed in a few hundred
// (2026-12-06). The diagonal's own term, which adds to row i and subtracts from column i, stays out of both.
inline void decayed_scores_backward(int64_t n, int64_t ld, const float* scores, const float* gamma,
                                    const float* gamma_low, float* decay, float* d_scores, double* d_gamma) {
  LATHE_ASSERT(ld <= 256 && ld % W == 0);
  alignas(64) double column_sums[256];
  std::fill(column_sums, column_sums + ld, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    float* row = d_scores + i * ld;
    const float* score_row = scores + i * ld;
    decay_row(gamma, gamma_low, i, i + 1, decay);
    alignas(64) double row_sums[W] = {};
    int64_t j = 0;
    for (; j + W <= i; j += W) {  // whole vectors left of the diagonal
      const VecF d = VecF::load(row + j), contribution = d * VecF::load(score_row + j);
      accumulate_doubles(row_sums, contribution);
      accumulate_doubles(column_sums + j, contribution);
      (d * VecF::load(decay + j)).store(row + j);
    }
    {  // the vector holding the diagonal: columns j .. i kept (the diagonal not summed), the rest zeroed
      const int valid = static_cast<int>(i + 1 - j);
      const VecF d = VecF::load_partial(row + j, valid);
      const VecF contribution = d * VecF::load_partial(score_row + j, valid - 1);
      accumulate_doubles(row_sums, contribution);
      accumulate_doubles(column_sums + j, contribution);
      (d * VecF::load(decay + j)).store(row + j);
      j += W;
    }
    for (; j < ld; j += W) VecF::zero().store(row + j);
    for (int lane = 0; lane < W; ++lane) d_gamma[i] += row_sums[lane];
  }
  for (int64_t j = 0; j < n; ++j) d_gamma[j] -= column_sums[j];
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

}  // namespace lathe::LATHE_ISA_NS::chunk_tiles
