// Unpacked kernels for the experts of a grouped GEMM that hold few rows. The blocked GEMM packs
// each expert's weight block before its register tiles run; with few rows the packing (a read
// of the weight from memory, a write and a re-read) costs as much as the multiply and does not
// overlap it. These kernels read the weight where it lies, once, in long contiguous runs that
// the hardware prefetchers follow while the FMAs run. Kernel sources only (per-ISA namespace,
// like matmul_gemm.h).
//
// Every output element is one fixed-order sum whatever block or thread computes it, so the
// results do not depend on how rows and columns are split.
#pragma once

#include <cstdint>

#include "lathe/core/simd.h"

namespace lathe::LATHE_ISA_NS::grouped_direct {

using simd::VecF;
constexpr int W = VecF::width;

// y (m x n) = x (m x k) @ w^T, w stored (n, k): every output is a dot product of two contiguous
// rows. Lane l of an accumulator sums the products at depth p = l (mod W) in order; the lanes
// are then added by reduce_add. MB x NB accumulators: 4 x 3 (AVX2, 16 registers with the 3
// weight vectors and one x vector), 4 x 6 (AVX-512, 31 of 32).
#if LATHE_KERNEL_ISA == 2
constexpr int kRowBlock = 4, kColumnBlock = 6;
#else
constexpr int kRowBlock = 4, kColumnBlock = 3;
#endif

// Cache lines to request while a block computes: the weight rows of the next column block, so
// that the memory stream overlaps the FMAs instead of stalling the first row block.
struct Prefetch {
  const char* begin = nullptr;  // first line
  int64_t lines = 0;            // contiguous 64-byte lines from begin
};

template <class Element, int MB, int NB>
inline void dot_block(const Element* __restrict x, int64_t ldx, const Element* __restrict w, int64_t ldw, int64_t k,
                      float* y, int64_t ldy, bool accumulate, Prefetch prefetch) {
  // lines per depth step (rounded up) so that the block's lines are requested over its steps
  [[maybe_unused]] const int64_t steps = k / W > 0 ? k / W : 1, per_step = (prefetch.lines + steps - 1) / steps;
  [[maybe_unused]] const char* prefetch_end = prefetch.begin + 64 * prefetch.lines;
  VecF acc[MB][NB];
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) acc[i][j] = VecF::zero();
  int64_t p = 0;
  for (; p + W <= k; p += W) {
#if LATHE_KERNEL_ISA >= 1
    for (int64_t l = 0; l < per_step && prefetch.begin < prefetch_end; ++l, prefetch.begin += 64)
      _mm_prefetch(prefetch.begin, _MM_HINT_T0);
#endif
    VecF wv[NB];
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) wv[j] = simd::load_row(w + j * ldw + p, W);
#pragma GCC unroll 8
    for (int i = 0; i < MB; ++i) {
      VecF xv = simd::load_row(x + i * ldx + p, W);
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[i][j] = simd::fma(xv, wv[j], acc[i][j]);
    }
  }
  if (p < k) {  // zero-filled partial vectors: the missing lanes add 0 * 0
    VecF wv[NB];
    for (int j = 0; j < NB; ++j) wv[j] = simd::load_row(w + j * ldw + p, k - p);
    for (int i = 0; i < MB; ++i) {
      VecF xv = simd::load_row(x + i * ldx + p, k - p);
      for (int j = 0; j < NB; ++j) acc[i][j] = simd::fma(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) {
      float sum = acc[i][j].reduce_add();
      y[i * ldy + j] = accumulate ? y[i * ldy + j] + sum : sum;
    }
}

// dot_block for a block of mb <= MB rows and nb <= NB columns.
template <class Element, int MB, int NB>
inline void dot_block_edge(int64_t mb, int64_t nb, const Element* x, int64_t ldx, const Element* w, int64_t ldw,
                           int64_t k, float* y, int64_t ldy, bool accumulate, Prefetch prefetch) {
  if constexpr (MB > 1)
    if (mb < MB) return dot_block_edge<Element, MB - 1, NB>(mb, nb, x, ldx, w, ldw, k, y, ldy, accumulate, prefetch);
  if constexpr (NB > 1)
    if (nb < NB) return dot_block_edge<Element, MB, NB - 1>(mb, nb, x, ldx, w, ldw, k, y, ldy, accumulate, prefetch);
  dot_block<Element, MB, NB>(x, ldx, w, ldw, k, y, ldy, accumulate, prefetch);
}

// Columns [n0, n1) of y = x @ w^T for m rows: column blocks outside, so NB weight rows stay in
// L1/L2 while every row block of x passes over them and the weight is read from memory once.
template <class Element>
inline void rows_times_weight_t(const Element* x, int64_t ldx, const Element* w, int64_t ldw, int64_t m, int64_t k,
                                int64_t n0, int64_t n1, float* y, int64_t ldy, bool accumulate) {
  const int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
  for (int64_t j = n0; j < n1; j += kColumnBlock) {
    const int64_t nb = n1 - j < kColumnBlock ? n1 - j : kColumnBlock;
    // The next block's weight rows, when they are contiguous (ldw == k), requested in equal
    // shares by this block's row blocks.
    const int64_t next_rows = n1 - j - nb < kColumnBlock ? n1 - j - nb : kColumnBlock;
    const char* next = reinterpret_cast<const char*>(w + (j + nb) * ldw);
    const int64_t next_lines = ldw == k && next_rows > 0 ? (next_rows * k * int64_t{sizeof(Element)} + 63) / 64 : 0;
    for (int64_t i = 0, block = 0; i < m; i += kRowBlock, ++block) {
      const int64_t mb = m - i < kRowBlock ? m - i : kRowBlock;
      const int64_t first = next_lines * block / row_blocks, last = next_lines * (block + 1) / row_blocks;
      dot_block_edge<Element, kRowBlock, kColumnBlock>(mb, nb, x + i * ldx, ldx, w + j * ldw, ldw, k, y + i * ldy + j,
                                                       ldy, accumulate, Prefetch{next + 64 * first, last - first});
    }
  }
}

}  // namespace lathe::LATHE_ISA_NS::grouped_direct
