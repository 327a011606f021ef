// The blocked GEMM of the matmul kernels, one thread's share of it, shared by every op that
// multiplies matrices on packed panels (matmul, grouped_matmul). Only for kernel sources compiled
// per ISA (lathe_add_isa_kernels): everything lives in namespace lathe::<isa>::gemm, so the three
// compilations never share a symbol. Three headers:
//   matmul_microkernels.h  the register tiles and the epilogue applied where a tile is stored
//   matmul_gemm.h          (this) the product's description (Gemm), the Paths, the cache blocks
//                          and gemm_range: one thread's rows x columns of C
//   matmul_gemm_run.h      how a product is spread over the threads (run_gemm)
//
// BLIS structure (gemm_range): for each nc-wide block of columns and kc-deep slice of K, B is
// packed into nr-wide micro-panels (L3/L1), then for each mc-tall block of rows A is packed into
// mr-tall micro-panels (L2), and an mr x nr register tile runs over each pair of micro-panels.
// Packing absorbs transposes, strides and bf16 -> f32 conversion, and pads edges with zeros, so
// the microkernel sees one layout. A Path (F32Path, Bf16DotPath, the AMX path of
// matmul_amx_path.h) supplies kMR, kNR, Packed, packed_depth, pack_a, pack_b and tile, and
// optionally begin_thread / end_thread around each thread's share (AMX: tile configuration), and
// optionally reads_a_in_place / tile_a_in_place, A read where it lies by whole tiles instead of
// packed (F32Path: a transposed f32 A, a weight gradient's dy^T; AmxInPlaceAPath: a row-major bf16
// A, whose rows a tile load takes at any stride), and reads_b_in_place, B's whole panels read
// where they lie at B's row stride (F32Path: a row-major f32 B with rows close together), and
// optionally tiles_pack_a / tiles_pack_b with tile_packing: the operand packed by the tiles that
// first read it where it lies (F32Path: a transposed A, a row-major B, not read in place). The
// epilogue (previous partial sum, accumulate, bias, activation) is applied where the tile is stored. Every element of C is
// summed over K in the same order (kc slices in order, depth steps in order inside a tile),
// whatever range of C a call covers: callers may split C among threads any way they like and get
// identical bits. Bf16DotPath runs on pair-interleaved bf16 panels: vdpbf16ps in the AVX-512
// compilation, an FMA emulation of it elsewhere (to test the layout on any machine).
#pragma once

#include <cstdint>
#include <cstring>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/simd.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/matmul/matmul_microkernels.h"
#include "lathe/ops/matmul/matmul_packing.h"
#include "lathe/ops/matmul/matmul_tiles.h"

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

// The rows of the short tile a Path runs on a ragged last panel of at most this many rows, where
// its tile is at least twice as tall (F32Path, Bf16DotPath).
constexpr int kRaggedPanelRows = 4;

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
  // A ragged last panel of at most 4 rows (zero-padded to MR) runs a 4-row tile: the full one
  // would multiply the padding too, 10 wasted rows of 14 where 256 rows end 18 x 14 + 4 (3.9% of
  // a 256-row weight gradient; docs/perf.md, "seventh session of 2026-12-07"). Same sums in the
  // same order for the rows it keeps.
  LATHE_GEMM_INLINE static void tile(int64_t depth, const Packed* a, const Packed* b, float* c, int64_t ldc,
                                     int64_t rows, int64_t cols, const Epilogue& e, int64_t ldb = kNR) {
    if constexpr (MR >= 2 * kRaggedPanelRows) {
      if (rows <= kRaggedPanelRows) return tile_f32<kRaggedPanelRows, NV, MR>(depth, a, b, c, ldc, rows, cols, e, ldb);
    }
    tile_f32<MR, NV>(depth, a, b, c, ldc, rows, cols, e, ldb);
  }
  // A row-major f32 B (bt's storage rows are depth steps: a weight gradient's x) is read where
  // it lies by whole panels where its rows are close enough (matmul_reads_b_in_place): each depth
  // step's NR values are contiguous there as in a packed panel, ldb (its row stride) apart.
  static bool reads_b_in_place(const Operand& bt) {
    return bt.transposed && !bt.bf16 && matmul_reads_b_in_place(bt.row_stride * static_cast<int64_t>(sizeof(float)));
  }
  // A transposed f32 A is not packed where the CPU's L1d takes it (matmul_reads_transposed_a_in_place:
  // 12 or more ways): whole tiles read it in place (tile_f32_depth_major_a), where its storage rows
  // (depth steps) are less than a page apart. At 4 KB (a 1024-wide weight gradient) every step is
  // a new page and all of A's lines fall in one L1 set: under AVX2 that ran 1024 x 256 x 4096 20%
  // slower than packing on an Intel Xeon (AVX-512 within 2-4% either way).
  static bool reads_a_in_place(const Operand& a, int64_t /*kb*/) {
    return a.transposed && !a.bf16 && a.row_stride * static_cast<int64_t>(sizeof(float)) < kDepthMajorMaxRowBytes &&
           matmul_reads_transposed_a_in_place();
  }
  // Rows [row, row + MR) x depth [p0, p0 + depth) of A[t]: element (i, p) at storage row p, column i.
  LATHE_GEMM_INLINE static void tile_a_in_place(int64_t depth, const Operand& a, int64_t t, int64_t row, int64_t p0,
                                                const Packed* b, float* c, int64_t ldc, int64_t cols, const Epilogue& e,
                                                int64_t ldb = kNR) {
    const float* base = static_cast<const float*>(a.data) + t * a.batch_stride + p0 * a.row_stride + row;
    tile_f32_depth_major_a<MR, NV>(depth, base, a.row_stride, b, c, ldc, cols, e, ldb);
  }
  // Packing by the tiles (matmul_tiles_pack): a transposed f32 A not read in place is copied into
  // its panels by the first sweep's tiles (each whole panel's tile against the first B panel), a
  // row-major f32 B not read in place by the first A panel's tile against each of its panels
  // (gemm_range's own B blocks only). tile_f32_packing reads the operand where it lies and stores
  // the packed copy as it multiplies.
  static bool tiles_pack_a(const Operand& a, int64_t kb) {
    return a.transposed && !a.bf16 && !reads_a_in_place(a, kb) && matmul_tiles_pack();
  }
  static bool tiles_pack_b(const Operand& bt) {
    return bt.transposed && !bt.bf16 && !reads_b_in_place(bt) && matmul_tiles_pack();
  }
  template <PanelA ASource, bool CopyB>
  LATHE_GEMM_INLINE static void tile_packing(int64_t depth, const float* a, int64_t lda, float* a_panel, const float* b,
                                             int64_t ldb, float* b_panel, float* c, int64_t ldc, int64_t rows,
                                             int64_t cols, const Epilogue& e) {
    tile_f32_packing<MR, NV, ASource, CopyB>(depth, a, lda, a_panel, b, ldb, b_panel, c, ldc, rows, cols, e);
  }
};

// Whether Path's tiles pack this A (F32Path::tiles_pack_a) in a K slice kb deep, and this B (as
// bt), instead of pack_a / pack_b.
template <class Path>
bool path_tiles_pack_a(const Operand& a, int64_t kb) {
  if constexpr (requires { Path::tiles_pack_a(a, kb); })
    return Path::tiles_pack_a(a, kb);
  else
    return false;
}
template <class Path>
bool path_tiles_pack_b(const Operand& bt) {
  if constexpr (requires { Path::tiles_pack_b(bt); })
    return Path::tiles_pack_b(bt);
  else
    return false;
}

// Whether Path reads this B (as bt) in place by whole panels instead of packing them.
template <class Path>
bool path_reads_b_in_place(const Operand& bt) {
  if constexpr (requires { Path::reads_b_in_place(bt); })
    return Path::reads_b_in_place(bt);
  else
    return false;
}

// The columns of an nb-wide B block that Path reads in place (whole panels from its first),
// which its packing skips: 0 where B is packed.
template <class Path>
int64_t in_place_b_columns(const Operand& bt, int64_t nb) {
  return path_reads_b_in_place<Path>(bt) ? nb / Path::kNR * Path::kNR : 0;
}

// Whether Path reads this A in place instead of packing it, in a K slice kb deep.
template <class Path>
bool path_reads_a_in_place(const Operand& a, int64_t kb) {
  if constexpr (requires { Path::reads_a_in_place(a, kb); })
    return Path::reads_a_in_place(a, kb);
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
                                        typename Path::Packed* b_pack, typename Path::Packed* a_pack,
                                        int64_t next_m0 = 0, int64_t next_m1 = 0, int64_t next_pc = -1,
                                        bool tiles_pack_b = false) {
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
  const bool a_in_place = path_reads_a_in_place<Path>(g.a, kb);
  // B read in place: whole panels from bt's storage (depth step p of column j at p * ldb + j);
  // the caller packed only a partial last panel (at its place in b_pack).
  const int64_t whole_b_cols = in_place_b_columns<Path>(g.bt, nb);
  const typename Path::Packed* b_source = nullptr;
  if (whole_b_cols > 0 || tiles_pack_b)
    b_source = static_cast<const typename Path::Packed*>(g.bt.data) + t * g.bt.batch_stride + pc * g.bt.row_stride + jc;
  // A packed by the first sweep's tiles (path_tiles_pack_a): whole panels there, the rest below.
  const bool tiles_pack_a = path_tiles_pack_a<Path>(g.a, kb);
  for (int64_t ic = m0; ic < m1; ic += mc) {
    const int64_t mb = min64(mc, m1 - ic), whole_rows = mb / MR * MR;
    const int64_t packed_from = a_in_place || tiles_pack_a ? whole_rows : 0;
    if (packed_from < mb)
      Path::pack_a(g.a, t, ic + packed_from, mb - packed_from, pc, kb, MR, a_pack + packed_from * depth);
    // The next A block's source lines, spread over the tiles of the last sweep over this block
    // (jr loop): packing it then reads from L2 instead of waiting on a fresh stream per row (a
    // narrow product, n = d_model, has few tiles per A block to hide those misses behind). Only
    // the last sweep: earlier ones still reread all of the packed A, which the prefetched lines
    // would push out of L2 (an f32 block is 688 KB of a 1 MB L2); the last one leaves behind it
    // panels it no longer needs. Not where the tiles pack A: their loads overlap the arithmetic
    // and request their own rows ahead (without these requests a 1024 x 256 x 4096 weight
    // gradient ran 1-2% faster on one Zen 4 thread, the other weight gradients within noise).
    LineStream next_a;
    int64_t a_lines_per_tile = 0;
    int64_t next_row = next_m0, next_end = next_m1, next_p0 = next_pc < 0 ? pc : next_pc;
    if (ic + mc < m1) next_row = ic + mc, next_end = m1, next_p0 = pc;
    if (next_row < next_end && next_p0 < g.k && !tiles_pack_a) {
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
        float* c_tile = c + (ic + ir) * g.ldc + jc + jr;
        if constexpr (requires { &Path::template tile_packing<PanelA::packed, true>; }) {
          // This tile packs what it reads first: A's whole panel on the first sweep, B's whole
          // panel in the first A panel's tile of the pass (gemm_range left both unpacked).
          const bool copy_a = tiles_pack_a && jr == 0 && ir < whole_rows;
          const bool copy_b = tiles_pack_b && ic == m0 && ir == 0 && jr + NR <= nb;  // B not in place
          if (copy_a || copy_b) {
            const bool a_where_it_lies = copy_a || (a_in_place && ir < whole_rows);
            const float* a_rows = a_where_it_lies ? static_cast<const float*>(g.a.data) + t * g.a.batch_stride +
                                                        pc * g.a.row_stride + ic + ir
                                                  : a_pack + ir * depth;
            const int64_t lda = a_where_it_lies ? g.a.row_stride : MR;
            const bool b_where_it_lies = jr < whole_b_cols || copy_b;
            const float* b_rows = b_where_it_lies ? b_source + jr : b_pack + jr * depth;
            const int64_t ldb = b_where_it_lies ? g.bt.row_stride : NR;
            float* const a_panel = a_pack + ir * depth;
            float* const b_panel = b_pack + jr * depth;
            const int64_t rows = min64(MR, mb - ir), cols = min64(NR, nb - jr);
            if (copy_a && copy_b)
              Path::template tile_packing<PanelA::in_place_copied, true>(depth, a_rows, lda, a_panel, b_rows, ldb,
                                                                         b_panel, c_tile, g.ldc, rows, cols, e);
            else if (copy_a)
              Path::template tile_packing<PanelA::in_place_copied, false>(depth, a_rows, lda, a_panel, b_rows, ldb,
                                                                          b_panel, c_tile, g.ldc, rows, cols, e);
            else if (a_where_it_lies)
              Path::template tile_packing<PanelA::in_place, true>(depth, a_rows, lda, a_panel, b_rows, ldb, b_panel,
                                                                  c_tile, g.ldc, rows, cols, e);
            else
              Path::template tile_packing<PanelA::packed, true>(depth, a_rows, lda, a_panel, b_rows, ldb, b_panel,
                                                                c_tile, g.ldc, rows, cols, e);
            continue;
          }
        }
        if constexpr (requires { Path::reads_b_in_place(g.bt); }) {
          if (jr < whole_b_cols) {
            if (a_in_place && ir < whole_rows)
              Path::tile_a_in_place(depth, g.a, t, ic + ir, pc, b_source + jr, c_tile, g.ldc, NR, e, g.bt.row_stride);
            else
              Path::tile(depth, a_pack + ir * depth, b_source + jr, c_tile, g.ldc, min64(MR, mb - ir), NR, e,
                         g.bt.row_stride);
            continue;
          }
        }
        if constexpr (requires { Path::reads_a_in_place(g.a, kb); }) {
          if (a_in_place && ir < whole_rows) {
            Path::tile_a_in_place(depth, g.a, t, ic + ir, pc, b_pack + jr * depth, c_tile, g.ldc, min64(NR, nb - jr),
                                  e);
            continue;
          }
        }
        Path::tile(depth, a_pack + ir * depth, b_pack + jr * depth, c_tile, g.ldc, min64(MR, mb - ir),
                   min64(NR, nb - jr), e);
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
  // B's whole panels packed by the tiles that first read them (path_tiles_pack_b), else here.
  const bool tiles_pack_b = path_tiles_pack_b<Path>(g.bt);
  for (int64_t jc = n0; jc < n1; jc += blocks.nc) {
    const int64_t nb = min64(blocks.nc, n1 - jc);
    for (int64_t pc = 0; pc < g.k; pc += blocks.kc) {
      const int64_t kb = min64(blocks.kc, g.k - pc);
      const int64_t whole_b_cols = tiles_pack_b ? nb / Path::kNR * Path::kNR : in_place_b_columns<Path>(g.bt, nb);
      if (whole_b_cols < nb)
        Path::pack_b(g.bt, t, jc + whole_b_cols, nb - whole_b_cols, pc, kb, Path::kNR,
                     b_pack + whole_b_cols * Path::packed_depth(kb));
      // The next pass starts on rows m0 again: at the next K slice, else at the next column block's first.
      multiply_b_block<Path>(g, blocks, t, m0, m1, n1, jc, nb, pc, kb, b_pack, a_pack, m0, m1,
                             next_pass_depth(g, pc, kb, jc, nb, n1), tiles_pack_b);
    }
  }
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
  // A ragged last panel of at most 4 rows runs a 4-row tile, as F32Path's.
  LATHE_GEMM_INLINE static void tile(int64_t depth, const Packed* a, const Packed* b, float* c, int64_t ldc,
                                     int64_t rows, int64_t cols, const Epilogue& e) {
    if constexpr (MR >= 2 * kRaggedPanelRows) {
      if (rows <= kRaggedPanelRows) return tile_bf16_dot<kRaggedPanelRows, NV, MR>(depth, a, b, c, ldc, rows, cols, e);
    }
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
