// The f32 GEMM with A read in place (oneDNN's brgemm shape), for a row-major f32 A: no packing
// of A, one packed B micro-panel per thread at a time over all of K. Only for kernel sources
// compiled per ISA (lathe_add_isa_kernels), like matmul_gemm.h whose pieces it uses.
//
// Work items are (batch entry, chunk of rows, B micro-panel of nr columns); threads claim them
// from a shared counter, so a thread the host slows down takes fewer items and nobody waits at a
// barrier. A thread packs its item's micro-panel (K x nr floats) into its one panel slot (kept
// between items, so it stays in L2; the packing stores hit lines already there, where a slot per
// panel would write to lines long gone to L3) unless the slot already holds it, requests the source lines
// of the next item's panel a few at a time while the tiles run, and then runs an mr x nr register
// tile down the rows, broadcasting A's elements straight from A's rows (mr row streams, which the
// hardware prefetchers follow) and writing each tile of C once, epilogue applied. Every element of
// C is summed over K in one order (0 .. K-1 in the tile), whatever the threads or chunks. All of
// K in one tile up to a 1 MB panel (K 4096 in f32): slices of 1024 or 2048 with partial sums
// through C measured 3-12% slower at 4096^3 on Zen 4, although all of K there makes a 1 MB panel
// that does not fit L2 beside A's rows. Deeper products run in slices of at most that panel (see
// "Depth slices" below): a 2 MB panel reread from a slow L3 ran at 0.61x oneDNN on an Intel Xeon.
//
// Why: the BLIS path (matmul_gemm.h) packs A per block, shares a B block between threads through
// a barrier per K slice and stores partial sums per slice; at 2 threads on Zen 4 that ran at
// 80-86% of the FMA peak where oneDNN's sgemm ran at 86-92%; this shape came within about 1% of
// oneDNN (geomean 0.98-1.03x over the bench's f32 shapes in five runs; docs/perf.md, "The f32
// GEMM takes the brgemm shape"). The shape came from `lathe optimize`'s found kernels, which found it by search.
//
// The bf16 form (Bf16InPlace, matmul's avx512_bf16 implementation) is the same walk over a
// row-major bf16 A and a panel of B packed into depth pairs (pack_bf16_pairs): each step
// broadcasts one 32-bit word of an A row, two consecutive depth values, which is exactly the pair
// vdpbf16ps multiplies with the panel's pair-interleaved columns.
#pragma once

#include <atomic>
#include <cstring>

#include "lathe/ops/matmul/matmul_gemm_run.h"

namespace lathe::LATHE_ISA_NS::gemm {

// The register tile of this path (matmul_in_place_tile): AVX-512 6 x 4 vectors (24 accumulators,
// 4 B vectors, one broadcast of 32 registers), AVX2 6 x 2 (of 16), scalar 4 x 4 (the scalar build
// exists to test the logic on any machine).
constexpr int kInPlaceMR = static_cast<int>(matmul_in_place_tile(kIsa).mr);
constexpr int kInPlaceNV = static_cast<int>(matmul_in_place_tile(kIsa).nr / W);
static_assert(matmul_in_place_tile(kIsa).nr % W == 0, "the in-place tile is whole vectors wide");
constexpr int kBf16InPlaceMR = static_cast<int>(matmul_bf16_in_place_tile(kIsa).mr);
constexpr int kBf16InPlaceNV = static_cast<int>(matmul_bf16_in_place_tile(kIsa).nr / 16);
static_assert(matmul_bf16_in_place_tile(kIsa).nr % 16 == 0, "the bf16 in-place tile is whole pair groups wide");

// The first two cache lines of each of the next tile's A rows, requested during the second half
// of the current tile, two lines per 16 depth steps. A tile starts MR new row streams, and the
// hardware prefetchers follow a stream only after its first misses: without this each tile began
// with MR rows' first lines missing to L3 together. Measured on Zen 4 (one thread, a 6 x 64 tile
// down 4096 rows of A read from L3, medians of 15 interleaved rounds): K 1024 106.2 -> 110.6
// GFLOP/s, K 2048 109.1 -> 111.5, K 4096 111.4 -> 112.1; in matmul at 2 threads, 1-3% at the f32
// square and model shapes (one line a row measured the same as two). Three or four lines a row
// ran 6-9% slower than none (the prefetchers, seeing no miss on a row's start, started later).
// docs/perf.md, "The next tile's row starts".
struct NextRowStarts {
  static constexpr int kLinesPerRow = 2;
  const char* first = nullptr;  // the next tile's first row
  int64_t stride = 0;           // bytes from one row to the next
  int rows = 0, issued = 0;

  NextRowStarts() = default;
  NextRowStarts(const void* first_row, int64_t stride_bytes, int64_t row_count)
      : first(static_cast<const char*>(first_row)), stride(stride_bytes), rows(static_cast<int>(row_count)) {}
  // Up to two more of the rows' first lines (rows first, then lines along each).
  LATHE_GEMM_INLINE void issue_two() {
    for (int n = 0; n < 2 && issued < rows * kLinesPerRow; ++n, ++issued) {
      const int row = issued / kLinesPerRow, line = issued % kLinesPerRow;
      simd::prefetch_read(first + row * stride + 64 * line);
    }
  }
};

// C[rows x cols] (+)= A's rows `a` (row stride lda) x the packed panel b (depth, NV * W), then the
// epilogue. `lines` lines of `next` (the next item's panel) are issued along the way, a few per 16
// depth steps: a burst at the start would fill the core's miss buffers and stall the tile; in its
// second half, the next tile's row starts too (NextRowStarts).
template <int MR, int NV>
LATHE_GEMM_INLINE void tile_f32_a_rows(int64_t depth, const float* a, int64_t lda, const float* __restrict b, float* c,
                                       int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e, LineStream& next,
                                       int64_t lines, NextRowStarts next_rows) {
  constexpr int NR = NV * W;
  const float* row[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) row[r] = a + (r < rows ? r : rows - 1) * lda;  // rows past the edge repeat the last
  VecF acc[MR][NV];
  begin_tile<MR, NV>(acc, c, ldc, rows, cols);
  const int64_t lines_per_chunk = lines > 0 ? (lines * 16 + depth - 1) / depth : 0;
  for (int64_t p0 = 0; p0 < depth; p0 += 16) {
    const int64_t p1 = min64(p0 + 16, depth);
    if (lines_per_chunk > 0) next.issue(lines_per_chunk);
    if (2 * p0 >= depth) next_rows.issue_two();
#pragma GCC unroll 2
    for (int64_t p = p0; p < p1; ++p) {
      VecF bv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) bv[v] = VecF::load(b + p * NR + v * W);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const VecF av = VecF::broadcast(row[r][p]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[r][v] = simd::fma(av, bv[v], acc[r][v]);
      }
    }
  }
  store_tile<MR, NV>(acc, c, ldc, rows, cols, e);
}

// The 32-bit word at p (two bf16 values, the first in the low half), from any alignment.
inline int32_t load_pair(const uint16_t* p) {
  int32_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}

// The bf16 form of tile_f32_a_rows: A's rows `a` are bf16 (row stride lda, in elements), b a
// panel of ceil(depth / 2) pairs x NV * 16 columns (pack_bf16_pairs), C's tile f32. An odd depth
// ends with the last A element alone in its word (the panel's other half of that pair is zero;
// A's next element, which may lie past the matrix, is never read). AVX-512: one vdpbf16ps per 16
// columns and pair; the other ISAs emulate it with two FMAs, as tile_bf16_dot does. The next
// tile's row starts are not requested here: the added code made GCC stop inlining store_tile's
// `activate`, and a call with the accumulators live put all 24 of them on the stack for the whole
// tile (0.88-0.95x oneDNN at 2048 x 16384 x 2048 where the form without ran 1.01-1.03x; docs/perf.md,
// "The next tile's row starts").
template <int MR, int NV>
LATHE_GEMM_INLINE void tile_bf16_a_rows(int64_t depth, const uint16_t* a, int64_t lda, const uint16_t* __restrict b,
                                        float* c, int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e,
                                        LineStream& next, int64_t lines) {
  constexpr int NR = NV * 16, NF = NR / W;
  const uint16_t* row[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) row[r] = a + (r < rows ? r : rows - 1) * lda;  // rows past the edge repeat the last
  VecF acc[MR][NF];
  begin_tile<MR, NF>(acc, c, ldc, rows, cols);
  const int64_t pairs = depth / 2, all_pairs = (depth + 1) / 2;
  const int64_t lines_per_chunk = lines > 0 ? (lines * 8 + all_pairs - 1) / all_pairs : 0;
  for (int64_t q0 = 0; q0 < pairs; q0 += 8) {
    const int64_t q1 = min64(q0 + 8, pairs);
    if (lines_per_chunk > 0) next.issue(lines_per_chunk);
#pragma GCC unroll 2
    for (int64_t q = q0; q < q1; ++q)
      bf16_pair_step<MR, NV>(acc, b, q, [&](int r) { return load_pair(row[r] + 2 * q); });
  }
  if (depth % 2) bf16_pair_step<MR, NV>(acc, b, pairs, [&](int r) { return static_cast<int32_t>(row[r][depth - 1]); });
  store_tile<MR, NF>(acc, c, ldc, rows, cols, e);
}

// What run_gemm_a_in_place needs of each form: A's element type, the packed panel and the tile.
template <int MR, int NV>
struct F32InPlace {
  static constexpr int kMR = MR, kNR = NV * W;
  using Element = float;
  using Packed = float;
  // A must be f32 in row-major storage; B may be anything the packing reads (transposed, bf16).
  static bool applies_to(const Operand& a, const Operand& /*bt*/) { return !a.bf16 && !a.transposed; }
  static int64_t packed_depth(int64_t depth) { return depth; }
  static void pack_panel(const Operand& bt, int64_t t, int64_t j0, int64_t cols, int64_t depth, Packed* panel) {
    pack_f32(bt, t, j0, cols, 0, depth, kNR, panel);
  }
  LATHE_GEMM_INLINE static void tile(int64_t depth, const Element* a, int64_t lda, const Packed* b, float* c,
                                     int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e, LineStream& next,
                                     int64_t lines, NextRowStarts next_rows) {
    tile_f32_a_rows<MR, NV>(depth, a, lda, b, c, ldc, rows, cols, e, next, lines, next_rows);
  }
};

template <int MR, int NV>
struct Bf16InPlace {
  static constexpr int kMR = MR, kNR = NV * 16;
  using Element = uint16_t;
  using Packed = uint16_t;
  // Both operands bf16 (the pair path's contract), A row-major.
  static bool applies_to(const Operand& a, const Operand& bt) { return a.bf16 && bt.bf16 && !a.transposed; }
  static int64_t packed_depth(int64_t depth) { return (depth + 1) / 2 * 2; }
  static void pack_panel(const Operand& bt, int64_t t, int64_t j0, int64_t cols, int64_t depth, Packed* panel) {
    pack_bf16_pairs(bt, t, j0, cols, 0, depth, kNR, panel);
  }
  LATHE_GEMM_INLINE static void tile(int64_t depth, const Element* a, int64_t lda, const Packed* b, float* c,
                                     int64_t ldc, int64_t rows, int64_t cols, const Epilogue& e, LineStream& next,
                                     int64_t lines, NextRowStarts /*next_rows: f32 only*/) {
    tile_bf16_a_rows<MR, NV>(depth, a, lda, b, c, ldc, rows, cols, e, next, lines);
  }
};

// Whether run_gemm_a_in_place<Path> takes a product: K = 0 and the skinny f32 products stay with
// run_gemm, which has their special cases.
template <class Path>
bool a_in_place_applies(const Gemm& g) {
  return Path::applies_to(g.a, g.bt) && g.k > 0 && g.m > 0 && g.n > 0 && g.batch > 0 && !skinny_gemm_applies(g);
}

// Path is one of the in-place forms above (their packed panel is one nr-wide slice of B over all of K).
template <class Path>
concept InPlaceForm = requires(const Operand& x) { Path::applies_to(x, x); };

// The items of one call: batch entries x row chunks x panels, in that order.
struct InPlaceItems {
  int64_t panels, chunks, row_tiles, count;
  int mr, nr;
  InPlaceItems(const Gemm& g, int mr_, int nr_, int threads) : mr(mr_), nr(nr_) {
    panels = (g.n + nr - 1) / nr;
    row_tiles = (g.m + mr - 1) / mr;
    // Rows are cut only where there are too few panels to keep every thread busy to the end
    // (four items per thread), and never below 8 tiles a chunk: each chunk packs its panels again.
    // Not to keep a chunk of A in L3: every panel then rereads A from memory (one byte per 32
    // flops, ~3.4 GB/s per core at Zen 4's peak, far from 2 cores' limit but not from 32 cores'),
    // but at 2 threads on Zen 4 chunks of 8 MB lost 3-9% at 4096^3 and 2048 x 2048 x 8192 (a
    // 1-2 MB panel packed again per 256-512-row chunk) and won nothing at 4096 x 2048 x 1024.
    const int64_t for_threads = (4 * threads + panels * g.batch - 1) / (panels * g.batch);
    chunks = max64(1, min64(for_threads, row_tiles / 8));
    count = g.batch * panels * chunks;
  }
  int64_t entry(int64_t item) const { return item / (panels * chunks); }
  int64_t panel(int64_t item) const { return item % panels; }
  int64_t chunk(int64_t item) const { return item / panels % chunks; }
  int64_t first_row(int64_t item) const { return row_tiles * chunk(item) / chunks * mr; }
  int64_t end_row(int64_t item, int64_t m) const { return min64(m, row_tiles * (chunk(item) + 1) / chunks * mr); }
  // Which packed panel an item needs: items with the same key share one.
  int64_t panel_key(int64_t item) const { return entry(item) * panels + panel(item); }
};

// Rows [r0, r1) of batch entry t against the packed panel of columns [j0, j0 + cols): the tiles
// down the rows, requesting `next`'s lines spread over them.
template <InPlaceForm Path>
LATHE_GEMM_INLINE void in_place_tiles(const Gemm& g, int64_t t, const typename Path::Packed* panel, int64_t j0,
                                      int64_t cols, int64_t r0, int64_t r1, LineStream& next) {
  constexpr int MR = Path::kMR;
  const int64_t tiles = (r1 - r0 + MR - 1) / MR;
  const int64_t lines_per_tile = tiles > 0 ? (next.lines() + tiles - 1) / tiles : 0;
  const auto* a = static_cast<const typename Path::Element*>(g.a.data) + t * g.a.batch_stride;
  float* c = g.c + t * g.c_batch_stride;
  const Epilogue e{g.accumulate, true, g.bias ? g.bias + j0 : nullptr, g.activation};
  const int64_t row_bytes = g.a.row_stride * static_cast<int64_t>(sizeof(typename Path::Element));
  for (int64_t i = r0; i < r1; i += MR) {
    const int64_t next_i = i + MR;
    const NextRowStarts next_rows =
        next_i < r1 ? NextRowStarts(a + next_i * g.a.row_stride, row_bytes, min64(MR, r1 - next_i)) : NextRowStarts();
    Path::tile(g.k, a + i * g.a.row_stride, g.a.row_stride, panel, c + i * g.ldc + j0, g.ldc, min64(MR, r1 - i), cols,
               e, next, lines_per_tile, next_rows);
  }
}

// gemm_a_in_place_range (below) for one depth slice.
template <InPlaceForm Path>
void gemm_a_in_place_range_slice(const Gemm& g, int64_t row0, int64_t row1, int64_t n0, int64_t n1) {
  constexpr int NR = Path::kNR;
  using Packed = typename Path::Packed;
  Packed* panel = reinterpret_cast<Packed*>(thread_scratch(1, sizeof(Packed) * NR * Path::packed_depth(g.k)));
  for (int64_t j0 = n0; j0 < n1; j0 += NR) {
    const int64_t cols = min64(NR, n1 - j0), next_j0 = j0 + NR;
    Path::pack_panel(g.bt, 0, j0, cols, g.k, panel);
    LineStream next;
    if (next_j0 < n1) next = operand_block_lines(g.bt, 0, next_j0, min64(NR, n1 - next_j0), 0, g.k);
    in_place_tiles<Path>(g, 0, panel, j0, cols, row0, row1, next);
  }
}

// run_gemm_a_in_place (below) for one depth slice: all threads claim its items.
template <InPlaceForm Path>
void run_gemm_a_in_place_slice(const Gemm& g) {
  constexpr int MR = Path::kMR, NR = Path::kNR;
  using Packed = typename Path::Packed;
  const double flops = 2.0 * g.batch * g.m * g.n * g.k;
  const int threads = flops < 2e5 ? 1 : num_threads();
  const InPlaceItems items(g, MR, NR, threads);
  std::atomic<int64_t> counter{0};
  auto work = [&](int /*part*/, int /*parts*/) {
    Packed* panel =
        reinterpret_cast<Packed*>(thread_scratch(1, sizeof(Packed) * NR * Path::packed_depth(g.k)));
    int64_t packed = -1;  // the (entry, panel) the slot holds
    int64_t item = counter.fetch_add(1, std::memory_order_relaxed);
    while (item < items.count) {
      // The next item is claimed before this one runs, so its panel's lines can be requested.
      const int64_t next_item = counter.fetch_add(1, std::memory_order_relaxed);
      const int64_t t = items.entry(item), j0 = items.panel(item) * NR, cols = min64(NR, g.n - j0);
      const int64_t key = items.panel_key(item);
      if (packed != key) {
        Path::pack_panel(g.bt, t, j0, cols, g.k, panel);
        packed = key;
      }
      LineStream next;
      if (next_item < items.count && items.panel_key(next_item) != key) {
        const int64_t next_j0 = items.panel(next_item) * NR;
        next = operand_block_lines(g.bt, items.entry(next_item), next_j0, min64(NR, g.n - next_j0), 0, g.k);
      }
      in_place_tiles<Path>(g, t, panel, j0, cols, items.first_row(item), items.end_row(item, g.m), next);
      item = next_item;
    }
  };
  if (threads <= 1) return work(0, 1);
  parallel_run(work);  // any number of parts works (nested: one): items go to whoever asks
}

// Depth slices. A panel holds all of K, so each row tile rereads it: from L2 while it fits beside
// A's rows, else from L3. Where L3 is slow that read bounds the tile: on an Intel Xeon (Emerald
// Rapids VM, 2 threads, L3 at 48 GB/s, 2 MB L2) 2048 x 2048 x 8192 (a 2 MB panel) ran at 0.61-0.68x
// oneDNN and 0.66-0.71x the BLIS path, while the 1 MB panels of 4096^3 and k 2048 ran at 1.00x
// oneDNN and 1.08-1.14x the BLIS path (docs/perf.md, "Depth slices for the in-place GEMM"). So K is
// cut into equal slices (multiples of 64 deep: whole bf16 pairs) whose panel is at most
// kInPlaceMaxPanelBytes; each slice adds onto C, and only the last adds the bias and applies the
// activation. On Zen 4 (fast L3) all of K in 1-2 MB panels was measured fine; its best depth at
// 4096^3 was the 1 MB panel these slices keep.
inline constexpr int64_t kInPlaceMaxPanelBytes = int64_t{1} << 20;

template <InPlaceForm Path>
int64_t in_place_slice_depth(int64_t k) {
  const int64_t bytes = static_cast<int64_t>(sizeof(typename Path::Packed)) * Path::kNR * Path::packed_depth(k);
  const int64_t slices = (bytes + kInPlaceMaxPanelBytes - 1) / kInPlaceMaxPanelBytes;
  if (slices <= 1) return k;
  return ((k + slices - 1) / slices + 63) / 64 * 64;
}

// body(slice) for each depth slice of g (in order; g itself when one slice does).
template <InPlaceForm Path, class Body>
void for_each_depth_slice(const Gemm& g, Body&& body) {
  const int64_t depth = in_place_slice_depth<Path>(g.k);
  if (depth >= g.k) return body(g);
  for (int64_t p0 = 0; p0 < g.k; p0 += depth) {
    const bool last = p0 + depth >= g.k;
    Gemm slice = g;
    slice.k = min64(depth, g.k - p0);
    slice.a = from_depth(g.a, p0);
    slice.bt = from_depth(g.bt, p0);
    slice.accumulate = g.accumulate || p0 > 0;
    slice.bias = last ? g.bias : nullptr;
    slice.activation = last ? g.activation : Activation::none;
    slice.streaming_c = false;  // a later slice reads C back, perhaps on another thread
    body(slice);
  }
}

// Rows [row0, row1) x columns [n0, n1) of batch entry 0 on the calling thread (grouped_matmul's
// runs, which split the work themselves): each panel packed into the thread's slot, the tiles
// down the rows, the next panel's lines requested during them; in depth slices as above. n0 is a
// multiple of Path::kNR (or n1). K = 0 writes C's zeros (or leaves it, accumulating).
template <InPlaceForm Path>
void gemm_a_in_place_range(const Gemm& whole, int64_t row0, int64_t row1, int64_t n0, int64_t n1) {
  for_each_depth_slice<Path>(whole, [&](const Gemm& g) { gemm_a_in_place_range_slice<Path>(g, row0, row1, n0, n1); });
}

// Path: F32InPlace or Bf16InPlace; the product one that a_in_place_applies<Path> takes.
// Deep products run in depth halves as run_gemm's do (run_depth_halves).
template <InPlaceForm Path>
void run_gemm_a_in_place(const Gemm& whole) {
  auto over_threads = [](const Gemm& part) {
    for_each_depth_slice<Path>(part, [](const Gemm& g) { run_gemm_a_in_place_slice<Path>(g); });
  };
  if (!depth_halves_apply(whole)) return over_threads(whole);
  run_depth_halves(
      whole, [](const Gemm& half) { gemm_a_in_place_range<Path>(half, 0, half.m, 0, half.n); }, over_threads);
}

}  // namespace lathe::LATHE_ISA_NS::gemm
