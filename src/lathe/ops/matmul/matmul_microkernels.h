// The register tiles of the blocked GEMM (matmul_gemm.h) and the epilogue applied where a tile
// is stored. Kernel sources only (compiled per ISA), namespace lathe::<isa>::gemm:
//   Epilogue, activate, store_tile   what happens to a tile's sums on their way into C (an earlier
//   (store_tile_sums, activate_rows) K slice's partial sums, accumulate, bias, activation)
//   begin_tile                       zeroed accumulators; C's rows requested ahead of the epilogue
//   tile_f32                         MR x NV vectors of C over packed f32 panels (or the first MR
//                                    rows of wider ones)
//   tile_f32_depth_major_a           the same with a transposed f32 A read where it lies
//   tile_f32_packing (copy_floats)   the same reading A and/or B where they lie and storing the
//                                    packed panels as it goes (the packing done by the tiles)
//   bf16_pair_step,                  MR x (NV * 16) over pair-interleaved bf16 panels: vdpbf16ps on
//   tile_bf16_dot                    AVX-512, an FMA emulation elsewhere (the layout testable anywhere)
// LATHE_GEMM_INLINE (always_inline outside sanitizer builds) keeps a tile's accumulators in
// registers whatever its caller; see multiply_b_block in matmul_gemm.h.
#pragma once

#include <cstdint>

#include "lathe/core/simd.h"
#include "lathe/ops/matmul/matmul.h"          // Activation
#include "lathe/ops/matmul/matmul_packing.h"  // this namespace's VecF and W


#if defined(__SANITIZE_ADDRESS__)
#define LATHE_GEMM_INLINE inline
#else
#define LATHE_GEMM_INLINE [[gnu::always_inline]] inline
#endif

namespace lathe::LATHE_ISA_NS::gemm {

struct Epilogue {
  bool load_c;        // add what c holds (an earlier K slice, or accumulate)
  bool finalize;      // last K slice: add bias, apply activation
  const float* bias;  // at the tile's first column, or null
  Activation activation;
  bool streaming = false;  // non-temporal stores of full aligned vectors (only with !load_c)
};

inline VecF activate(VecF x, Activation activation) {
  switch (activation) {
    case Activation::none:
      return x;
    case Activation::relu:
      return simd::max(x, VecF::zero());
    case Activation::silu:
      return x * simd::sigmoid(x);
    case Activation::gelu_tanh: {
      VecF inner = x * simd::fma(VecF::broadcast(0.044715f) * x, x, VecF::broadcast(1.0f));
      VecF t = simd::tanh(inner * VecF::broadcast(0.7978845608028654f));
      return VecF::broadcast(0.5f) * x * (VecF::broadcast(1.0f) + t);
    }
  }
  return x;
}

// c[r][0 .. cols) = activate(c[r][0 .. cols)) for r < rows: a tile's activation, applied after
// its sums are stored. Out of line on purpose: called inside store_tile's loop with the tile's
// other accumulators still live, activate (whose exp GCC inlines or not by the file's budget) made
// the compiler keep every accumulator on the stack for the whole depth loop, and an unrelated
// change elsewhere in the file could tip it (register_tile_spill_check; docs/perf.md).
[[gnu::noinline]] inline void activate_rows(float* c, int64_t ldc, int64_t rows, int64_t cols, Activation activation) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; j += W) {
      float* p = c + r * ldc + j;
      const int width = cols - j >= W ? W : static_cast<int>(cols - j);
      const VecF x = width == W ? VecF::load(p) : VecF::load_partial(p, width);
      if (width == W)
        activate(x, activation).store(p);
      else
        activate(x, activation).store_partial(p, width);
    }
}

// The tile's sums into C: + C (load_c), + bias (finalize); e.activation is store_tile's.
template <int MR, int NV>
LATHE_GEMM_INLINE void store_tile_sums(VecF (&acc)[MR][NV], float* c, int64_t ldc, int64_t rows, int64_t cols,
                                       const Epilogue& e) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    if (r >= rows) break;
    float* row = c + r * ldc;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      int64_t n = cols - v * W;
      if (n <= 0) break;
      int width = n >= W ? W : static_cast<int>(n);
      VecF x = acc[r][v];
      if (e.load_c) x = x + (width == W ? VecF::load(row + v * W) : VecF::load_partial(row + v * W, width));
      if (e.finalize && e.bias)
        x = x + (width == W ? VecF::load(e.bias + v * W) : VecF::load_partial(e.bias + v * W, width));
      if (e.streaming)
        simd::store_row_streaming(row + v * W, x, width);
      else if (width == W)
        x.store(row + v * W);
      else
        x.store_partial(row + v * W, width);
    }
  }
}

// A tile's sums into C with the epilogue: + C (load_c); on the last K slice (finalize) + bias and
// the activation, which activate_rows applies to the stored rows.
template <int MR, int NV>
LATHE_GEMM_INLINE void store_tile(VecF (&acc)[MR][NV], float* c, int64_t ldc, int64_t rows, int64_t cols,
                                  const Epilogue& e) {
  if (!e.finalize || e.activation == Activation::none) return store_tile_sums<MR, NV>(acc, c, ldc, rows, cols, e);
  Epilogue sums = e;
  sums.streaming = false;  // read back at once
  store_tile_sums<MR, NV>(acc, c, ldc, rows, cols, sums);
  activate_rows(c, ldc, rows < MR ? rows : MR, cols < NV * W ? cols : NV * W, e.activation);
}

// Zeroes a tile's accumulators and requests its C rows now: the epilogue reads (or writes) them
// after all the depth steps, and a tile of a large C would otherwise wait on a cache miss per row.
template <int MR, int NV>
LATHE_GEMM_INLINE void begin_tile(VecF (&acc)[MR][NV], float* c, int64_t ldc, int64_t rows, int64_t cols) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = VecF::zero();
  for (int r = 0; r < MR; ++r) {
    if (r >= rows) break;
    simd::prefetch_read(c + r * ldc);
    simd::prefetch_read(c + r * ldc + cols - 1);
  }
}

// f32 micro-panels: a is (depth, MR), b is (depth, MR * NV * W), both packed. A panel packed
// APanel rows wide (> MR) is read by its first MR rows: the ragged last panel of a product whose
// rows are not a multiple of the tile's (F32Path::tile).
template <int MR, int NV, int APanel = MR>
LATHE_GEMM_INLINE void tile_f32(int64_t depth, const float* __restrict a, const float* __restrict b, float* c,
                                int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e, int64_t ldb = NV * W) {
  static_assert(APanel >= MR, "a tile reads at most its panel's rows");
  VecF acc[MR][NV];
  begin_tile<MR, NV>(acc, c, ldc, rows, cols);
  for (int64_t p = 0; p < depth; ++p) {
    VecF bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = VecF::load(b + p * ldb + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      VecF av = VecF::broadcast(a[p * APanel + r]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fma(av, bv[v], acc[r][v]);
    }
  }
  store_tile<MR, NV>(acc, c, ldc, rows, cols, e);
}

// A depth-major A read where it lies (a transposed f32 operand: element (r, p) at a[p * lda + r],
// a weight gradient's dy^T), b packed as for tile_f32; a whole tile of MR rows (the edge tile is
// packed instead: its rows past the matrix are not there to read). Each depth step's A values
// are a new storage row, 1-4 KB from the last, which the hardware prefetchers do not follow: the
// row kDepthMajorPrefetchSteps ahead is requested into L1 (its first and last element, which may
// lie on two lines). Packing that A instead (one 56-byte copy per storage row and panel, half of
// them across a line) ran at 13 GB/s even from L2 on an Intel Xeon: ~10% of a 256 x 256 x 4096
// weight gradient (docs/perf.md, "Weight gradients read dy^T in place").
constexpr int64_t kDepthMajorPrefetchSteps = 8;
constexpr int64_t kDepthMajorMaxRowBytes = 4096;  // F32Path reads A in place below this row stride

template <int MR, int NV>
LATHE_GEMM_INLINE void tile_f32_depth_major_a(int64_t depth, const float* a, int64_t lda, const float* __restrict b,
                                              float* c, int64_t ldc, int64_t cols, const Epilogue& e,
                                              int64_t ldb = NV * W) {
  VecF acc[MR][NV];
  begin_tile<MR, NV>(acc, c, ldc, MR, cols);
  for (int64_t p = 0; p < depth; ++p) {
    const float* column = a + p * lda;
    simd::prefetch_read(column + kDepthMajorPrefetchSteps * lda);  // a hint: never faults past the end
    simd::prefetch_read(column + kDepthMajorPrefetchSteps * lda + MR - 1);
    VecF bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = VecF::load(b + p * ldb + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      VecF av = VecF::broadcast(column[r]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fma(av, bv[v], acc[r][v]);
    }
  }
  store_tile<MR, NV>(acc, c, ldc, MR, cols, e);
}

// Copies the n (a compile-time count) floats at src to dst: the panel row of a tile that packs as
// it multiplies (tile_f32_packing). 8-float copies, the last overlapping the one before, where
// n >= 8; a 4-float one and single floats below (never reading past src + n: the source is the
// operand itself, whose last row may end there).
template <int N>
LATHE_GEMM_INLINE void copy_floats(float* __restrict dst, const float* __restrict src) {
#if LATHE_KERNEL_ISA >= 1
  if constexpr (N >= 8) {
#pragma GCC unroll 8
    for (int r = 0; r < N; r += 8) {
      const int at = r + 8 <= N ? r : N - 8;
      _mm256_storeu_ps(dst + at, _mm256_loadu_ps(src + at));
    }
    return;
  } else if constexpr (N >= 4) {
    _mm_storeu_ps(dst, _mm_loadu_ps(src));
#pragma GCC unroll 4
    for (int r = 4; r < N; ++r) dst[r] = src[r];
    return;
  }
#endif
#pragma GCC unroll 8
  for (int r = 0; r < N; ++r) dst[r] = src[r];
}

// Where tile_f32_packing reads A's panel: packed (a, MR values a step), or where it lies (a
// transposed f32 A: element (r, p) at a[p * lda + r]), and then also copied into the packed panel.
enum class PanelA { packed, in_place, in_place_copied };

// An MR x (NV * W) tile that packs as it multiplies: with PanelA::in_place_copied each depth
// step's MR values of A, read where they lie, are also stored into the packed panel a_panel
// (depth, MR); with CopyB, B's NV * W values of step p, read where they lie (b + p * ldb, a
// row-major f32 B), are also stored into the packed panel b_panel (depth, NV * W). Otherwise A
// and B are read as tile_f32 and tile_f32_depth_major_a read them. The later tiles over the same
// panels read the copies: the values the packing would have written, and the sums are
// tile_f32's, in its order. The point: the packing's loads from L3 no longer wait alone, with the
// FMA units idle, but overlap the first tile's arithmetic (docs/perf.md, "first session of
// 2026-12-08"). An A read where it lies is a whole tile (rows = MR). Source rows are requested
// as far ahead as the transposed packing whose loads this replaces requests them
// (kPackPrefetchRows into L1, kPackPrefetchFarRows into L2; matmul_packing.h).
template <int MR, int NV, PanelA ASource, bool CopyB>
LATHE_GEMM_INLINE void tile_f32_packing(int64_t depth, const float* a, int64_t lda, float* __restrict a_panel,
                                        const float* b, int64_t ldb, float* __restrict b_panel, float* c, int64_t ldc,
                                        int64_t rows, int64_t cols, const Epilogue& e) {
  static_assert(ASource == PanelA::in_place_copied || CopyB, "the other forms are tile_f32's");
  VecF acc[MR][NV];
  begin_tile<MR, NV>(acc, c, ldc, rows, cols);
  for (int64_t p = 0; p < depth; ++p) {
    const float* a_row = a + p * lda;
    const float* b_row = b + p * ldb;
    if constexpr (ASource != PanelA::packed) {  // hints: never fault past the end
      simd::prefetch_read(a_row + kPackPrefetchRows * lda);
      simd::prefetch_read(a_row + kPackPrefetchRows * lda + MR - 1);
      simd::prefetch_read_l2(a_row + kPackPrefetchFarRows * lda);
      simd::prefetch_read_l2(a_row + kPackPrefetchFarRows * lda + MR - 1);
    }
    if constexpr (ASource == PanelA::in_place_copied) copy_floats<MR>(a_panel + p * MR, a_row);
    VecF bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = VecF::load(b_row + v * W);
    if constexpr (CopyB) {
#pragma GCC unroll 8
      for (int64_t byte = 0; byte < NV * W * 4; byte += 64) {
        simd::prefetch_read(reinterpret_cast<const char*>(b_row + kPackPrefetchRows * ldb) + byte);
        simd::prefetch_read_l2(reinterpret_cast<const char*>(b_row + kPackPrefetchFarRows * ldb) + byte);
      }
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) bv[v].store(b_panel + p * (NV * W) + v * W);
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      VecF av = VecF::broadcast(a_row[r]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fma(av, bv[v], acc[r][v]);
    }
  }
  store_tile<MR, NV>(acc, c, ldc, rows, cols, e);
}

// One depth pair q of an MR x (NV * 16) tile over a pair-interleaved panel b: word(r) is row r's
// 32-bit pair of A (from a packed panel, or from A's row in place: matmul_gemm_in_place.h).
// AVX-512: one vdpbf16ps per 16 columns. Other ISAs emulate it with two FMAs (same layout, so the
// packing is testable on any machine; the registered avx512_bf16 implementation only uses the
// native form).
template <int MR, int NV, class Word>
LATHE_GEMM_INLINE void bf16_pair_step(VecF (&acc)[MR][NV * 16 / W], const uint16_t* __restrict b, int64_t q,
                                      Word&& word) {
  constexpr int NR = NV * 16;
#if LATHE_KERNEL_ISA == 2
  __m512bh bv[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + (q * NR + v * 16) * 2);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    const __m512bh av = (__m512bh)_mm512_set1_epi32(word(r));
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v].v = _mm512_dpbf16_ps(acc[r][v].v, av, bv[v]);
  }
#else
  constexpr int NF = NR / W;
  VecF b_lo[NF], b_hi[NF];
  for (int f = 0; f < NF; ++f) simd::load_bf16_pairs(b + (q * NR + f * W) * 2, b_lo[f], b_hi[f]);
  for (int r = 0; r < MR; ++r) {
    const uint32_t pair = static_cast<uint32_t>(word(r));
    const VecF a_lo = VecF::broadcast(bf16_bits_to_float(static_cast<uint16_t>(pair & 0xffffu)));
    const VecF a_hi = VecF::broadcast(bf16_bits_to_float(static_cast<uint16_t>(pair >> 16)));
    for (int f = 0; f < NF; ++f) acc[r][f] = simd::fma(a_hi, b_hi[f], simd::fma(a_lo, b_lo[f], acc[r][f]));
  }
#endif
}

// MR x (NV * 16) tile over pair-interleaved panels (of APanel rows: a ragged last panel's first
// MR, as tile_f32).
template <int MR, int NV, int APanel = MR>
LATHE_GEMM_INLINE void tile_bf16_dot(int64_t depth, const uint16_t* __restrict a, const uint16_t* __restrict b,
                                     float* c, int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e) {
  static_assert(APanel >= MR, "a tile reads at most its panel's rows");
  constexpr int NF = NV * 16 / W;
  const int64_t pairs = depth / 2;
  VecF acc[MR][NF];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int f = 0; f < NF; ++f) acc[r][f] = VecF::zero();
  const int32_t* a_pairs = reinterpret_cast<const int32_t*>(a);
  for (int64_t q = 0; q < pairs; ++q) bf16_pair_step<MR, NV>(acc, b, q, [&](int r) { return a_pairs[q * APanel + r]; });
  store_tile<MR, NF>(acc, c, ldc, rows, cols, e);
}

}  // namespace lathe::LATHE_ISA_NS::gemm
