// The blocked GEMM machinery of the matmul kernels, shared by every op that multiplies matrices
// on packed panels (matmul, grouped_matmul). Only for kernel sources compiled per ISA
// (lathe_add_isa_kernels): everything lives in namespace lathe::<isa>::gemm, so the three
// compilations never share a symbol.
//
// BLIS structure (gemm_range): for each nc-wide block of columns and kc-deep slice of K, B is
// packed into nr-wide micro-panels (L3/L1), then for each mc-tall block of rows A is packed into
// mr-tall micro-panels (L2), and an mr x nr register tile runs over each pair of micro-panels.
// Packing absorbs transposes, strides and bf16 -> f32 conversion, and pads edges with zeros, so
// the microkernel sees one layout. A Path (F32Path, Bf16DotPath, the AMX path of
// matmul_amx_kernels.cc) supplies kMR, kNR, Packed, packed_depth, pack_a, pack_b and tile, and
// optionally begin_thread / end_thread around each thread's share (AMX: tile configuration), and
// optionally reads_a_in_place / tile_a_in_place (F32Path: a transposed f32 A, a weight gradient's
// dy^T, is read where it lies by whole tiles instead of packed). The epilogue (previous
// partial sum, accumulate, bias, activation) is applied where the tile is stored. Every element of C is summed over K
// in the same order (kc slices in order, depth steps in order inside a tile), whatever range of C a call covers:
// callers may split C among threads any way they like and get identical bits. Deep products
// (run_depth_halves) sum the two halves of K separately and then add them: a fixed order too, by
// shape, whatever the thread count. Bf16DotPath runs on pair-interleaved bf16
// panels: vdpbf16ps in the AVX-512 compilation, an FMA emulation of it elsewhere (to test the layout on any machine).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/matmul/matmul_packing.h"
#include "lathe/ops/matmul/matmul_tiles.h"

#if defined(__SANITIZE_ADDRESS__)
#define LATHE_GEMM_INLINE inline
#else
#define LATHE_GEMM_INLINE [[gnu::always_inline]] inline
#endif

namespace lathe::LATHE_ISA_NS::gemm {

// c[t] (m x n, f32, row stride ldc) = epilogue(a[t] (m x k) @ bt[t]^T (k x n)).
struct Gemm {
  Operand a, bt;
  float* c = nullptr;
  int64_t c_batch_stride = 0, ldc = 0;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  const float* bias = nullptr;  // (n) or null
  Activation activation = Activation::none;
  bool accumulate = false;
  // Request the next B block's source lines while the tiles of the current block run (grouped
  // GEMMs stream every expert's weight from memory once: the packing would otherwise wait on
  // memory with the FMA units idle). Values are unaffected.
  bool prefetch_next_b = false;
  // Store C with non-temporal stores where a tile is final and overwritten (no read of c): for
  // outputs far larger than the caches written once, such as every expert's dw. Values are
  // unaffected; the caller issues streaming_fence() after its share.
  bool streaming_c = false;
};

// Software prefetch of the cache lines of `segments` byte runs of equal length, `stride` bytes
// apart, issued a few at a time.
struct LineStream {
  const char* segment = nullptr;  // first line of the current run
  int64_t stride = 0, segment_lines = 0, segments_left = 0, line = 0;

  LineStream() = default;
  LineStream(const void* begin, int64_t bytes, int64_t stride_bytes, int64_t segments) {
    if (bytes <= 0 || segments <= 0) return;
    const uintptr_t address = reinterpret_cast<uintptr_t>(begin);
    segment = reinterpret_cast<const char*>(address & ~uintptr_t{63});
    segment_lines = (static_cast<int64_t>(address & 63) + bytes + 63) / 64;
    stride = stride_bytes;
    segments_left = segments;
  }
  int64_t lines() const { return segment_lines * segments_left; }
  void issue(int64_t count) {
    for (; count > 0 && segments_left > 0; --count) {
#if LATHE_KERNEL_ISA >= 1
      _mm_prefetch(segment + 64 * line, _MM_HINT_T1);
#endif
      if (++line == segment_lines) {
        line = 0;
        segment += stride;
        --segments_left;
      }
    }
  }
};

// The source lines of an operand's block: its rows [row0, row0 + rows) (rows of A, or columns of
// C for bt) x depth [p0, p0 + depth).
inline LineStream operand_block_lines(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t p0,
                                      int64_t depth) {
  const int64_t element = x.bf16 ? 2 : 4;
  const char* base = static_cast<const char*>(x.data) + t * x.batch_stride * element;
  if (x.transposed)  // storage rows are depth steps
    return LineStream(base + (p0 * x.row_stride + row0) * element, rows * element, x.row_stride * element, depth);
  return LineStream(base + (row0 * x.row_stride + p0) * element, depth * element, x.row_stride * element, rows);
}

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

template <int MR, int NV>
LATHE_GEMM_INLINE void store_tile(VecF (&acc)[MR][NV], float* c, int64_t ldc, int64_t rows, int64_t cols,
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
      if (e.finalize) {
        if (e.bias) x = x + (width == W ? VecF::load(e.bias + v * W) : VecF::load_partial(e.bias + v * W, width));
        x = activate(x, e.activation);
      }
      if (e.streaming)
        simd::store_row_streaming(row + v * W, x, width);
      else if (width == W)
        x.store(row + v * W);
      else
        x.store_partial(row + v * W, width);
    }
  }
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

// f32 micro-panels: a is (depth, MR), b is (depth, MR * NV * W), both packed.
template <int MR, int NV>
LATHE_GEMM_INLINE void tile_f32(int64_t depth, const float* __restrict a, const float* __restrict b, float* c,
                                int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e) {
  constexpr int NR = NV * W;
  VecF acc[MR][NV];
  begin_tile<MR, NV>(acc, c, ldc, rows, cols);
  for (int64_t p = 0; p < depth; ++p) {
    VecF bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = VecF::load(b + p * NR + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      VecF av = VecF::broadcast(a[p * MR + r]);
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
                                              float* c, int64_t ldc, int64_t cols, const Epilogue& e) {
  constexpr int NR = NV * W;
  VecF acc[MR][NV];
  begin_tile<MR, NV>(acc, c, ldc, MR, cols);
  for (int64_t p = 0; p < depth; ++p) {
    const float* column = a + p * lda;
    simd::prefetch_read(column + kDepthMajorPrefetchSteps * lda);  // a hint: never faults past the end
    simd::prefetch_read(column + kDepthMajorPrefetchSteps * lda + MR - 1);
    VecF bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = VecF::load(b + p * NR + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      VecF av = VecF::broadcast(column[r]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fma(av, bv[v], acc[r][v]);
    }
  }
  store_tile<MR, NV>(acc, c, ldc, MR, cols, e);
}

// Grow-only per-thread scratch: pool threads persist, so packing buffers are allocated once.
inline float* thread_scratch(int slot, size_t bytes) {
  // A block, B block, a B block shared by the threads, a depth half's partial sums (run_gemm)
  static thread_local AlignedBuffer buffers[4];
  if (buffers[slot].bytes() < bytes) buffers[slot] = AlignedBuffer(bytes + 4096);
  return buffers[slot].as<float>();
}

inline int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }
inline int64_t min64(int64_t x, int64_t y) { return x < y ? x : y; }
inline int64_t max64(int64_t x, int64_t y) { return x > y ? x : y; }

// K = 0: the product is zero; only the epilogue remains.
inline void epilogue_only(const Gemm& g, int64_t t, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t i = m0; i < m1; ++i) {
    float* row = g.c + t * g.c_batch_stride + i * g.ldc;
    for (int64_t j = n0; j < n1; ++j) {
      float bias = g.bias ? g.bias[j] : 0.0f;
      if (g.accumulate)
        row[j] += bias;
      else {
        VecF x = activate(VecF::broadcast(bias), g.activation);
        float lanes[W];
        x.store(lanes);
        row[j] = lanes[0];
      }
    }
  }
}

// The f32 path: packs f32 (converting bf16) and runs tile_f32.
template <int MR, int NV>
struct F32Path {
  static constexpr int kMR = MR, kNR = NV * W;
  using Packed = float;
  static int64_t packed_depth(int64_t depth) { return depth; }
  static void pack_a(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth, int width,
                     Packed* dest) {
    pack_f32(x, t, row0, rows, col0, depth, width, dest);
  }
  static void pack_b(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth, int width,
                     Packed* dest) {
    pack_f32(x, t, row0, rows, col0, depth, width, dest);
  }
  LATHE_GEMM_INLINE static void tile(int64_t depth, const Packed* a, const Packed* b, float* c, int64_t ldc,
                                     int64_t rows, int64_t cols, const Epilogue& e) {
    tile_f32<MR, NV>(depth, a, b, c, ldc, rows, cols, e);
  }
  // A transposed f32 A is not packed: whole tiles read it in place (tile_f32_depth_major_a), where
  // its storage rows (depth steps) are less than a page apart. At 4 KB (a 1024-wide weight
  // gradient) every step is a new page and all of A's lines fall in one L1 set: under AVX2 that
  // ran 1024 x 256 x 4096 20% slower than packing (AVX-512 within 2-4% either way).
  static bool reads_a_in_place(const Operand& a) {
    return a.transposed && !a.bf16 && a.row_stride * static_cast<int64_t>(sizeof(float)) < kDepthMajorMaxRowBytes;
  }
  LATHE_GEMM_INLINE static void tile_a_in_place(int64_t depth, const float* a, int64_t lda, const Packed* b, float* c,
                                                int64_t ldc, int64_t cols, const Epilogue& e) {
    tile_f32_depth_major_a<MR, NV>(depth, a, lda, b, c, ldc, cols, e);
  }
};

// Whether Path reads this A in place instead of packing it (F32Path with a transposed f32 A).
template <class Path>
bool path_reads_a_in_place(const Operand& a) {
  if constexpr (requires { Path::reads_a_in_place(a); })
    return Path::reads_a_in_place(a);
  else
    return false;
}

// The cache blocks of one call: sizes rounded to the register tile, and the largest packed blocks.
template <class Path>
struct Blocking {
  int64_t mc, nc, kc, depth_max, a_elements, b_elements;
  Blocking(const Gemm& g, const MatmulCpuConfig& config, int64_t rows, int64_t cols) {
    constexpr int MR = Path::kMR, NR = Path::kNR;
    mc = max64(MR, config.mc / MR * MR), nc = max64(NR, config.nc / NR * NR);
    kc = max64(2, config.kc / 2 * 2);
    depth_max = Path::packed_depth(min64(kc, g.k));
    a_elements = min64(mc, round_up(rows, MR)) * depth_max;
    b_elements = min64(nc, round_up(cols, NR)) * depth_max;
  }
};

// LATHE_GEMM_INLINE (the tile, its store, multiply_b_block) is always_inline: gemm_range<Path> is
// then one function whose accumulators stay in registers whatever the caller. Left to the
// compiler's budget, a file that instantiates many paths (the grouped GEMM) got an out-of-line tile
// store whose activation switch spilled the accumulators; flattening the callers instead cost that
// file 95 s of compile and ran the grouped backward 1.3-1.5x slower than this (Qwen3-30B and OLMoE
// shapes). Plain inline under AddressSanitizer: forced inlining of the instrumented tiles took the
// sanitizer build of the matmul kernels from 38 s to 280 s, and speed is not its point.
// Rows [m0, m1) of batch entry t against one packed B block: columns [jc, jc + nb) of C, K slice
// [pc, pc + kb), B's micro-panels in b_pack (column j's panel at j * depth); n1 bounds the columns
// of this caller's share (for the next-block prefetch); rows [next_m0, next_m1), when not empty,
// are the rows this caller multiplies next, in K slice next_pc (-1: this one): their first A block
// is prefetched during the last.
template <class Path>
LATHE_GEMM_INLINE void multiply_b_block(const Gemm& g, const Blocking<Path>& blocks, int64_t t, int64_t m0, int64_t m1,
                                        int64_t n1, int64_t jc, int64_t nb, int64_t pc, int64_t kb,
                                        const typename Path::Packed* b_pack, typename Path::Packed* a_pack,
                                        int64_t next_m0 = 0, int64_t next_m1 = 0, int64_t next_pc = -1) {
  constexpr int MR = Path::kMR, NR = Path::kNR;
  const int64_t mc = blocks.mc, nc = blocks.nc, kc = blocks.kc, depth = Path::packed_depth(kb);
  float* c = g.c + t * g.c_batch_stride;
  Epilogue base{pc > 0 || g.accumulate, pc + kb >= g.k, nullptr, g.activation};
  base.streaming = g.streaming_c && !base.load_c && base.finalize;
  LineStream next_b;
  int64_t lines_per_tile = 0;
  if (g.prefetch_next_b) {  // the next block: the next K slice, else the next column block
    if (pc + kc < g.k)
      next_b = operand_block_lines(g.bt, t, jc, nb, pc + kc, min64(kc, g.k - pc - kc));
    else if (jc + nc < n1)
      next_b = operand_block_lines(g.bt, t, jc + nc, min64(nc, n1 - jc - nc), 0, min64(kc, g.k));
    const int64_t tiles = (m1 - m0 + MR - 1) / MR * ((nb + NR - 1) / NR);
    lines_per_tile = (next_b.lines() + tiles - 1) / tiles;
  }
  // A read in place: only a partial last tile is packed (at its place in a_pack).
  const bool a_in_place = path_reads_a_in_place<Path>(g.a);
  for (int64_t ic = m0; ic < m1; ic += mc) {
    const int64_t mb = min64(mc, m1 - ic), whole_rows = a_in_place ? mb / MR * MR : 0;
    if (whole_rows < mb)
      Path::pack_a(g.a, t, ic + whole_rows, mb - whole_rows, pc, kb, MR, a_pack + whole_rows * depth);
    // The next A block's source lines, spread over the tiles of the last sweep over this block
    // (jr loop): packing it then reads from L2 instead of waiting on a fresh stream per row (a
    // narrow product, n = d_model, has few tiles per A block to hide those misses behind). Only
    // the last sweep: earlier ones still reread all of the packed A, which the prefetched lines
    // would push out of L2 (an f32 block is 688 KB of a 1 MB L2); the last one leaves behind it
    // panels it no longer needs.
    LineStream next_a;
    int64_t a_lines_per_tile = 0;
    int64_t next_row = next_m0, next_end = next_m1, next_p0 = next_pc < 0 ? pc : next_pc;
    if (ic + mc < m1) next_row = ic + mc, next_end = m1, next_p0 = pc;
    if (next_row < next_end && next_p0 < g.k) {
      next_a = operand_block_lines(g.a, t, next_row, min64(mc, next_end - next_row), next_p0, min64(kc, g.k - next_p0));
      a_lines_per_tile = (next_a.lines() + (mb + MR - 1) / MR - 1) / ((mb + MR - 1) / MR);
    }
    for (int64_t jr = 0; jr < nb; jr += NR) {
      Epilogue e = base;
      e.bias = g.bias ? g.bias + jc + jr : nullptr;
      const bool last_sweep = jr + NR >= nb;
      for (int64_t ir = 0; ir < mb; ir += MR) {
        if (lines_per_tile) next_b.issue(lines_per_tile);
        if (last_sweep && a_lines_per_tile) next_a.issue(a_lines_per_tile);
        if constexpr (requires { Path::reads_a_in_place(g.a); }) {
          if (ir < whole_rows) {  // element (i, p) of a transposed A at storage row p, column i
            const float* a = static_cast<const float*>(g.a.data) + t * g.a.batch_stride + pc * g.a.row_stride + ic + ir;
            Path::tile_a_in_place(depth, a, g.a.row_stride, b_pack + jr * depth, c + (ic + ir) * g.ldc + jc + jr,
                                  g.ldc, min64(NR, nb - jr), e);
            continue;
          }
        }
        Path::tile(depth, a_pack + ir * depth, b_pack + jr * depth, c + (ic + ir) * g.ldc + jc + jr, g.ldc,
                   min64(MR, mb - ir), min64(NR, nb - jr), e);
      }
    }
  }
}

// The K slice the pass after (column block jc..jc+nb, slice pc..pc+kb) starts at: the next slice,
// else the first of the next column block (below n1), else g.k (none: nothing to prefetch).
inline int64_t next_pass_depth(const Gemm& g, int64_t pc, int64_t kb, int64_t jc, int64_t nb, int64_t n1) {
  return pc + kb < g.k ? pc + kb : jc + nb < n1 ? 0 : g.k;
}

// One thread's share: rows [m0, m1) x columns [n0, n1) of batch entry t.
template <class Path>
inline void gemm_range(const Gemm& g, const MatmulCpuConfig& config, int64_t t, int64_t m0, int64_t m1, int64_t n0,
                       int64_t n1) {
  if (m0 >= m1 || n0 >= n1) return;
  if (g.k == 0) return epilogue_only(g, t, m0, m1, n0, n1);
  using Packed = typename Path::Packed;
  const Blocking<Path> blocks(g, config, m1 - m0, n1 - n0);
  Packed* a_pack = reinterpret_cast<Packed*>(thread_scratch(0, sizeof(Packed) * blocks.a_elements));
  Packed* b_pack = reinterpret_cast<Packed*>(thread_scratch(1, sizeof(Packed) * blocks.b_elements));
  for (int64_t jc = n0; jc < n1; jc += blocks.nc) {
    const int64_t nb = min64(blocks.nc, n1 - jc);
    for (int64_t pc = 0; pc < g.k; pc += blocks.kc) {
      const int64_t kb = min64(blocks.kc, g.k - pc);
      Path::pack_b(g.bt, t, jc, nb, pc, kb, Path::kNR, b_pack);
      // The next pass starts on rows m0 again: at the next K slice, else at the next column block's first.
      multiply_b_block<Path>(g, blocks, t, m0, m1, n1, jc, nb, pc, kb, b_pack, a_pack, m0, m1,
                             next_pass_depth(g, pc, kb, jc, nb, n1));
    }
  }
}

// Splits W packed bf16 pairs into the even (lo) and odd (hi) depth steps as floats.
inline void load_pairs(const uint16_t* p, VecF& lo, VecF& hi) {
#if LATHE_KERNEL_ISA == 2
  __m512i x = _mm512_loadu_si512(p);
  lo.v = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  hi.v = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
#elif LATHE_KERNEL_ISA == 1
  __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  lo.v = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  hi.v = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
#else
  lo.v = bf16_bits_to_float(p[0]);
  hi.v = bf16_bits_to_float(p[1]);
#endif
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
  for (int f = 0; f < NF; ++f) load_pairs(b + (q * NR + f * W) * 2, b_lo[f], b_hi[f]);
  for (int r = 0; r < MR; ++r) {
    const uint32_t pair = static_cast<uint32_t>(word(r));
    const VecF a_lo = VecF::broadcast(bf16_bits_to_float(static_cast<uint16_t>(pair & 0xffffu)));
    const VecF a_hi = VecF::broadcast(bf16_bits_to_float(static_cast<uint16_t>(pair >> 16)));
    for (int f = 0; f < NF; ++f) acc[r][f] = simd::fma(a_hi, b_hi[f], simd::fma(a_lo, b_lo[f], acc[r][f]));
  }
#endif
}

// MR x (NV * 16) tile over pair-interleaved panels.
template <int MR, int NV>
LATHE_GEMM_INLINE void tile_bf16_dot(int64_t depth, const uint16_t* __restrict a, const uint16_t* __restrict b,
                                     float* c, int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e) {
  constexpr int NF = NV * 16 / W;
  const int64_t pairs = depth / 2;
  VecF acc[MR][NF];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int f = 0; f < NF; ++f) acc[r][f] = VecF::zero();
  const int32_t* a_pairs = reinterpret_cast<const int32_t*>(a);
  for (int64_t q = 0; q < pairs; ++q) bf16_pair_step<MR, NV>(acc, b, q, [&](int r) { return a_pairs[q * MR + r]; });
  store_tile<MR, NF>(acc, c, ldc, rows, cols, e);
}

template <int MR, int NV>
struct Bf16DotPath {
  static constexpr int kMR = MR, kNR = NV * 16;
  using Packed = uint16_t;
  static int64_t packed_depth(int64_t depth) { return (depth + 1) / 2 * 2; }
  static void pack_a(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth, int width,
                     Packed* dest) {
    pack_bf16_pairs(x, t, row0, rows, col0, depth, width, dest);
  }
  static void pack_b(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth, int width,
                     Packed* dest) {
    pack_bf16_pairs(x, t, row0, rows, col0, depth, width, dest);
  }
  LATHE_GEMM_INLINE static void tile(int64_t depth, const Packed* a, const Packed* b, float* c, int64_t ldc,
                                     int64_t rows, int64_t cols, const Epilogue& e) {
    tile_bf16_dot<MR, NV>(depth, a, b, c, ldc, rows, cols, e);
  }
};

// Runs Path's per-thread setup (if it has one) for the lifetime of the object.
template <class Path>
struct ThreadSetup {
  ThreadSetup() {
    if constexpr (requires { Path::begin_thread(); }) Path::begin_thread();
  }
  ~ThreadSetup() {
    if constexpr (requires { Path::end_thread(); }) Path::end_thread();
  }
};

// The rows of one product in chunks, handed out to the threads that share each packed B block:
// a thread takes the next chunk when it has multiplied one, so a thread the host slows (a
// preempted vCPU) multiplies fewer rows instead of holding the others at the next barrier (the
// static halves it replaced ran 2-thread products at 0.71-1.08x oneDNN on a noisy Zen 3 VM,
// docs/perf.md). Chunk sizes are guided: each claim takes 1 / (2 * threads) of the row tiles
// left, at most an A block (mc rows) and at least one tile, so the chunks shrink towards the end
// of a block and the first thread to finish waits at most about one small chunk for the others
// (equal chunks, 4 or more per thread, made it wait half a chunk on average: the barrier waits of
// both threads summed 1.1 -> 0.9 ms per 1024^3 product and 2.9 -> 2.0 ms per 2048^3 product on 2
// threads on Zen 4). Which thread multiplies a row never changes its sums: K is still added in one
// order.
class RowChunks {
 public:
  RowChunks(int64_t rows, int64_t mc, int mr, int threads)
      : rows_(rows), mr_(mr), threads_(threads), tiles_((rows + mr - 1) / mr), most_tiles_(max64(1, mc / mr)) {}
  // Claims the next chunk as [r0, r1); false, and an empty range, when none is left.
  bool take(int64_t& r0, int64_t& r1) {
    int64_t first = next_.load(std::memory_order_relaxed);
    for (;;) {
      if (first >= tiles_) {
        r0 = r1 = rows_;
        return false;
      }
      const int64_t end = first + chunk_tiles(first);
      if (next_.compare_exchange_weak(first, end, std::memory_order_relaxed)) {
        r0 = first * mr_;
        r1 = min64(rows_, end * mr_);
        return true;
      }
    }
  }
  // The rows of the chunk claimed `index`-th in a block, empty past the last. Also what a thread
  // is likely to take first in the next block (thread `part` usually claims chunk `part` when all
  // leave a barrier).
  void rows_of(int64_t index, int64_t& r0, int64_t& r1) const {
    int64_t first = 0;
    for (int64_t chunk = 0; chunk < index && first < tiles_; ++chunk) first += chunk_tiles(first);
    if (first >= tiles_) {
      r0 = r1 = rows_;
      return;
    }
    r0 = first * mr_;
    r1 = min64(rows_, (first + chunk_tiles(first)) * mr_);
  }
  // Starts the next B block's hand-out: one thread calls it once every thread has stopped taking
  // chunks of the block before, and before any takes one of the next.
  void restart() { next_.store(0, std::memory_order_relaxed); }

 private:
  // The size in tiles of the chunk that starts at tile `first`.
  int64_t chunk_tiles(int64_t first) const {
    const int64_t share = (tiles_ - first + 2 * threads_ - 1) / (2 * threads_);
    return min64(most_tiles_, max64(1, share));
  }

  const int64_t rows_;
  const int mr_, threads_;
  const int64_t tiles_, most_tiles_;
  std::atomic<int64_t> next_{0};
};

// Threads that split M of one product (they all multiply the same B) pack each B block together
// into a buffer they share: each packs a share of its micro-panels, all wait, all multiply row
// chunks (RowChunks) against the whole block. Each thread packing the whole B itself cost 5-10% of
// a 1024^3 product on 2 threads (docs/perf.md). Two buffers alternate, so one wait per block
// suffices: a thread packs its share of block s + 1 as soon as it has multiplied its chunks of
// block s (into the other buffer), and the wait after that packing also tells every thread that
// all have finished block s, whose buffer block s + 2 then reuses. A thread the host slowed down
// thus overlaps its partner's packing instead of two waits per block. With the grouped packing of
// a transposed B (matmul_packing.h), medians on 2 threads on Zen 4 went 12.8 -> 11.1-12.1 ms at
// 1024^3, 97.6 -> 86.6 ms at 2048^3 and 728 -> 671 ms at 4096^3 (docs/perf.md).
// `rows` holds one RowChunks per buffer; `b_packs` the two buffers; `sync` waits for every thread.
// The last wait of a call ends it, so the next call (batch entry) starts with both buffers free.
template <class Path, class Sync>
void gemm_rows_shared_b(const Gemm& g, const MatmulCpuConfig& config, int64_t t, RowChunks (&rows)[2],
                        typename Path::Packed* const (&b_packs)[2], int part, int parts, Sync&& sync) {
  using Packed = typename Path::Packed;
  constexpr int NR = Path::kNR;
  const Blocking<Path> blocks(g, config, g.m, g.n);
  Packed* a_pack = reinterpret_cast<Packed*>(thread_scratch(0, sizeof(Packed) * blocks.a_elements));
  int slot = 0;
  for (int64_t jc = 0; jc < g.n; jc += blocks.nc) {
    const int64_t nb = min64(blocks.nc, g.n - jc), panels = (nb + NR - 1) / NR;
    for (int64_t pc = 0; pc < g.k; pc += blocks.kc) {
      const int64_t kb = min64(blocks.kc, g.k - pc), depth = Path::packed_depth(kb);
      const int64_t first = panels * part / parts * NR, last = min64(nb, panels * (part + 1) / parts * NR);
      Packed* b_pack = b_packs[slot];
      if (first < last) Path::pack_b(g.bt, t, jc + first, last - first, pc, kb, NR, b_pack + first * depth);
      sync();
      // Every thread has left the previous block: its hand-out is restarted for the block after this one.
      if (part == 0) rows[slot ^ 1].restart();
      // The next chunk is claimed before this one is multiplied, so its A block can be prefetched;
      // after the last, the chunk this thread probably takes first in the next K slice (or column
      // block): a weight gradient's A (dy^T, ta=1) is read 4 KB apart per depth step, a new page
      // each, which the hardware prefetchers do not follow.
      const int64_t next_block_pc = next_pass_depth(g, pc, kb, jc, nb, g.n);
      RowChunks& chunks = rows[slot];
      int64_t m0, m1, next_m0, next_m1;
      for (bool more = chunks.take(m0, m1); more; m0 = next_m0, m1 = next_m1) {
        more = chunks.take(next_m0, next_m1);
        int64_t next_pc = pc;
        if (!more) chunks.rows_of(part, next_m0, next_m1), next_pc = next_block_pc;
        multiply_b_block<Path>(g, blocks, t, m0, m1, g.n, jc, nb, pc, kb, b_pack, a_pack, next_m0, next_m1,
                               next_pc);
      }
      slot ^= 1;
    }
  }
  sync();
  if (part == 0) rows[0].restart(), rows[1].restart();
}

// A barrier for the threads of one parallel_run (spins briefly, then yields: the machine may be
// shared, and a preempted thread must not be waited on at full power). Each spin is a `pause`:
// on an SMT sibling a bare spin takes issue slots from the thread being waited for, and in a VM
// a pause loop lets the hypervisor run a preempted vCPU instead (pause-loop exiting).
class SpinBarrier {
 public:
  explicit SpinBarrier(int count) : count_(count) {}
  void wait() {
    const int64_t generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    for (int spin = 0; generation_.load(std::memory_order_acquire) == generation; ++spin) {
      __builtin_ia32_pause();
      if (spin > 2000) std::this_thread::yield();
    }
  }

 private:
  const int count_;
  std::atomic<int> arrived_{0};
  std::atomic<int64_t> generation_{0};
};

// A product at most kSkinnyMaxN outputs wide with row-major a and bt and a plain store: a linear
// layer's forward through a few weight rows (a router, a sigmoid gate: x (m x k) by bt (n x k)).
// The tiles would compute NR columns for the few wanted and pack all of a; here each output is the
// dot product of a row of a with a row of bt, kept as vector partial sums over k (bt's rows stay
// in L1) and reduced once. Rows are split over threads; each output's sum has one fixed order.
constexpr int64_t kSkinnyMaxN = 16;

inline bool skinny_gemm_applies(const Gemm& g) {
  return g.n <= kSkinnyMaxN && g.k > 0 && !g.a.bf16 && !g.bt.bf16 && !g.a.transposed && !g.bt.transposed &&
         g.bias == nullptr && g.activation == Activation::none && !g.streaming_c;
}

// Outputs [j0, j0 + J) of one row (a's row pointer) into c_row.
template <int J>
void skinny_outputs(const Gemm& g, const float* row, const float* bt, int64_t j0, float* c_row) {
  VecF acc[J];
  for (int j = 0; j < J; ++j) acc[j] = VecF::zero();
  const int64_t full = g.k / W * W;
  for (int64_t p = 0; p < full; p += W) {
    const VecF x = VecF::load(row + p);
    for (int j = 0; j < J; ++j) acc[j] = simd::fma(x, VecF::load(bt + (j0 + j) * g.bt.row_stride + p), acc[j]);
  }
  if (full < g.k) {
    const int tail = static_cast<int>(g.k - full);
    const VecF x = VecF::load_partial(row + full, tail);
    for (int j = 0; j < J; ++j)
      acc[j] = simd::fma(x, VecF::load_partial(bt + (j0 + j) * g.bt.row_stride + full, tail), acc[j]);
  }
  for (int j = 0; j < J; ++j) {
    const float value = acc[j].reduce_add();
    c_row[j0 + j] = g.accumulate ? c_row[j0 + j] + value : value;
  }
}

inline void skinny_gemm(const Gemm& g) {
  constexpr int64_t kRowsPerTask = 64;
  for (int64_t t = 0; t < g.batch; ++t) {
    const float* a = static_cast<const float*>(g.a.data) + t * g.a.batch_stride;
    const float* bt = static_cast<const float*>(g.bt.data) + t * g.bt.batch_stride;
    float* c = g.c + t * g.c_batch_stride;
    parallel_for(g.m, kRowsPerTask, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* row = a + i * g.a.row_stride;
        float* c_row = c + i * g.ldc;
        int64_t j = 0;
        for (; j + 4 <= g.n; j += 4) skinny_outputs<4>(g, row, bt, j, c_row);
        switch (g.n - j) {
          case 3:
            skinny_outputs<3>(g, row, bt, j, c_row);
            break;
          case 2:
            skinny_outputs<2>(g, row, bt, j, c_row);
            break;
          case 1:
            skinny_outputs<1>(g, row, bt, j, c_row);
            break;
          default:
            break;
        }
      }
    });
  }
}

// Splits the work over threads: whole batch entries when there are enough, else the longer of
// M and N in whole tiles (rows: the threads share each packed B block, gemm_rows_shared_b).
// Every element is computed by one thread in the same K order, whatever the split.
template <class Path>
void run_gemm_over_threads(const Gemm& g, const MatmulCpuConfig& config) {
  constexpr int MR = Path::kMR, NR = Path::kNR;
  const double flops = 2.0 * g.batch * g.m * g.n * (g.k + 1);
  const int64_t threads = flops < 2e5 ? 1 : num_threads();
  const int64_t m_tiles = (g.m + MR - 1) / MR, n_tiles = (g.n + NR - 1) / NR;
  const bool split_batch = g.batch >= threads;
  const bool split_rows = m_tiles * NR >= n_tiles * MR * 2 || n_tiles < threads;
  if (threads > 1 && !split_batch && split_rows && g.k > 0) {
    using Packed = typename Path::Packed;
    const Blocking<Path> blocks(g, config, g.m, g.n);
    Packed* b_pack = reinterpret_cast<Packed*>(thread_scratch(2, sizeof(Packed) * blocks.b_elements * 2));
    Packed* const b_packs[2] = {b_pack, b_pack + blocks.b_elements};
    SpinBarrier barrier(static_cast<int>(threads));
    RowChunks rows[2] = {RowChunks(g.m, blocks.mc, MR, static_cast<int>(threads)),
                         RowChunks(g.m, blocks.mc, MR, static_cast<int>(threads))};
    parallel_run([&](int part, int parts) {
      ThreadSetup<Path> setup;
      if (parts != threads) {  // nested inside another parallel region: one thread does it all
        for (int64_t t = 0; t < g.batch; ++t) gemm_range<Path>(g, config, t, 0, g.m, 0, g.n);
        return;
      }
      for (int64_t t = 0; t < g.batch; ++t)
        gemm_rows_shared_b<Path>(g, config, t, rows, b_packs, part, parts, [&] { barrier.wait(); });
    });
    return;
  }
  auto work = [&](int64_t part, int64_t parts) {
    ThreadSetup<Path> setup;
    if (split_batch) {
      for (int64_t t = g.batch * part / parts; t < g.batch * (part + 1) / parts; ++t)
        gemm_range<Path>(g, config, t, 0, g.m, 0, g.n);
    } else if (split_rows) {  // K = 0 or one thread
      int64_t begin = min64(g.m, m_tiles * part / parts * MR), end = min64(g.m, m_tiles * (part + 1) / parts * MR);
      for (int64_t t = 0; t < g.batch; ++t) gemm_range<Path>(g, config, t, begin, end, 0, g.n);
    } else {
      int64_t begin = min64(g.n, n_tiles * part / parts * NR), end = min64(g.n, n_tiles * (part + 1) / parts * NR);
      for (int64_t t = 0; t < g.batch; ++t) gemm_range<Path>(g, config, t, 0, g.m, begin, end);
    }
  };
  if (threads <= 1) return work(0, 1);
  parallel_for(threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) work(part, threads);
  });
}

// x with its depth starting at p0 (A's columns; B's rows where transposed storage runs over depth).
inline Operand from_depth(const Operand& x, int64_t p0) {
  Operand out = x;
  const int64_t step = x.transposed ? x.row_stride : 1;
  out.data = static_cast<const char*>(x.data) + p0 * step * (x.bf16 ? 2 : 4);
  return out;
}

// Deep products (one batch entry, K >= kDepthHalvesRatio x the larger of M and N, K >= 1024: the
// weight gradients of narrow layers, 256 x 256 x 4096 tokens) run as two GEMMs over the two
// halves of K, the second's sums into scratch and added onto the first's in one pass that then
// adds the bias and applies the activation. On 2 threads each half is one thread's, with its own
// packing and no barrier: the row split shares each B block through a barrier per K slice, and on
// an Intel Xeon (2 vCPUs) a 256 x 256 x 4096 weight gradient ran at 0.81x oneDNN that way and
// 0.95x in halves (docs/perf.md, "Weight gradients read dy^T in place"). The halves are a property
// of the shape, not of the thread count: other counts run them one after the other, each over all
// threads, and every count gets the same bits.
constexpr int64_t kDepthHalvesRatio = 8;

inline bool depth_halves_apply(const Gemm& g) {
  return g.batch == 1 && g.k >= 1024 && g.k >= kDepthHalvesRatio * max64(g.m, g.n) && !g.streaming_c;
}

// The halves of g: on_one_thread(half) runs a half on the calling thread, over_threads(half) over
// all threads (both give the same bits).
template <class OnOneThread, class OverThreads>
void run_depth_halves(const Gemm& g, OnOneThread&& on_one_thread, OverThreads&& over_threads) {
  const int64_t half = g.k / 2 / 64 * 64;  // whole bf16 pairs and AMX depth blocks
  Gemm first = g, second = g;
  first.k = half;
  first.bias = nullptr;
  first.activation = Activation::none;
  second.k = g.k - half;
  second.a = from_depth(g.a, half);
  second.bt = from_depth(g.bt, half);
  second.c = thread_scratch(3, sizeof(float) * g.m * g.n);  // (m, n)
  second.ldc = g.n;
  second.accumulate = false;
  second.bias = nullptr;
  second.activation = Activation::none;
  if (num_threads() == 2 && 2.0 * g.m * g.n * g.k >= 2e5) {
    parallel_for(2, 1, [&](int64_t begin, int64_t end) {
      for (int64_t part = begin; part < end; ++part) on_one_thread(part == 0 ? first : second);
    });
  } else {
    over_threads(first);
    over_threads(second);
  }
  parallel_for(g.m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* row = g.c + i * g.ldc;
      const float* partial = second.c + i * g.n;
      for (int64_t j = 0; j < g.n; j += W) {
        const int width = g.n - j >= W ? W : static_cast<int>(g.n - j);
        auto load = [&](const float* p) { return width == W ? VecF::load(p) : VecF::load_partial(p, width); };
        VecF x = load(row + j) + load(partial + j);
        if (g.bias) x = x + load(g.bias + j);
        x = activate(x, g.activation);
        if (width == W)
          x.store(row + j);
        else
          x.store_partial(row + j, width);
      }
    }
  });
}

// C = epilogue(A B) for any Path: the skinny form, the depth halves, or run_gemm_over_threads.
template <class Path>
void run_gemm(const Gemm& g, const MatmulCpuConfig& config) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  if (skinny_gemm_applies(g)) return skinny_gemm(g);
  if (depth_halves_apply(g))
    return run_depth_halves(
        g,
        [&](const Gemm& half) {
          ThreadSetup<Path> setup;
          gemm_range<Path>(half, config, 0, 0, half.m, 0, half.n);
        },
        [&](const Gemm& half) { run_gemm_over_threads<Path>(half, config); });
  run_gemm_over_threads<Path>(g, config);
}

inline Operand operand(const TensorView& view, bool transposed) {
  Operand x;
  x.data = view.data;
  x.bf16 = view.dtype == DType::bf16;
  x.batch_stride = view.rank() == 3 ? view.stride(0) : 0;
  x.row_stride = view.stride(-2);
  x.transposed = transposed;
  return x;
}

// The Gemm of matmul's forward: c = epilogue(op(a) @ op(b)).
inline Gemm matmul_forward_gemm(const MatmulArgs& args) {
  Gemm g;
  g.a = operand(args.a, args.trans_a);
  g.bt = operand(args.b, !args.trans_b);
  g.c = static_cast<float*>(args.c.data);
  g.c_batch_stride = args.c.rank() == 3 ? args.c.stride(0) : 0;
  g.ldc = args.c.stride(-2);
  g.batch = args.c.rank() == 3 ? args.c.dim(0) : 1;
  g.m = args.c.dim(-2);
  g.n = args.c.dim(-1);
  g.k = args.trans_a ? args.a.dim(-2) : args.a.dim(-1);
  g.bias = static_cast<const float*>(args.bias.data);
  g.activation = args.activation;
  g.accumulate = args.accumulate;
  return g;
}

// Calls visit.template operator()<Path>() with the f32 path of the config's register tile.
template <class Visit>
void with_f32_path(const MatmulCpuConfig& config, Visit&& visit) {
#if LATHE_KERNEL_ISA == 2
  switch (config.microkernel) {
    case 1:
      return visit.template operator()<F32Path<6, 4>>();
    case 2:
      return visit.template operator()<F32Path<8, 3>>();
    default:
      return visit.template operator()<F32Path<14, 2>>();
  }
#elif LATHE_KERNEL_ISA == 1
  if (config.microkernel == 1) return visit.template operator()<F32Path<4, 3>>();
  return visit.template operator()<F32Path<6, 2>>();
#else
  (void)config;
  return visit.template operator()<F32Path<4, 4>>();
#endif
}

// The same for the bf16 pair path (one emulated tile outside AVX-512: those builds exist to
// test the packing).
template <class Visit>
void with_bf16_dot_path(const MatmulCpuConfig& config, Visit&& visit) {
#if LATHE_KERNEL_ISA == 2
  switch (config.microkernel) {
    case 1:
      return visit.template operator()<Bf16DotPath<6, 4>>();
    case 2:
      return visit.template operator()<Bf16DotPath<8, 3>>();
    default:
      return visit.template operator()<Bf16DotPath<14, 2>>();
  }
#else
  (void)config;
  return visit.template operator()<Bf16DotPath<LATHE_KERNEL_ISA == 1 ? 6 : 2, 1>>();
#endif
}

}  // namespace lathe::LATHE_ISA_NS::gemm
