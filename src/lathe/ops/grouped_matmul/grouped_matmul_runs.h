// How the grouped matmul kernels split their work, for every Path of matmul_gemm.h (the vector
// paths of grouped_matmul_kernels.cc, the AMX path of grouped_matmul_amx_kernels.cc); kernel
// sources only (lathe_add_isa_kernels / lathe_add_amx_kernels). Each expert's
// product is matmul's blocked GEMM (matmul_gemm.h) on a slice of the operands; this file only
// decides who computes what. The work is one flat list of units, laid out as
//   column segment x expert x row tile   (forward and dx: rows are the expert's rows;
//                                         dw: rows are dw[e]'s N rows, depth the expert's rows)
// cut into `threads` contiguous shares of equal cost. A share is a few runs (segment, expert,
// row tiles), each one gemm_range call, so an expert's weight block is packed once per run: at
// most experts + threads - 1 times per column segment. Columns are split into segments only
// when rows are too few to share (or A is smaller than B), as matmul does. Each output element
// belongs to one run and is summed over depth in gemm_range's fixed order, so results are
// bitwise identical for any thread count. In the forward, experts with few rows skip the packing
// (grouped_matmul_direct.h; chosen by the expert's row count, never by the split); the packed
// products of experts with few rows prefetch their next weight block while their tiles run.
#pragma once

#include <cstdint>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/grouped_matmul/grouped_matmul.h"
#include "lathe/ops/grouped_matmul/grouped_matmul_direct.h"
#include "lathe/ops/matmul/matmul_gemm.h"
#include "lathe/ops/matmul/matmul_gemm_in_place.h"

namespace lathe::LATHE_ISA_NS::grouped {

using namespace gemm;

inline int64_t ceil_div(int64_t value, int64_t divisor) { return (value + divisor - 1) / divisor; }

// The units of `groups` groups, group g holding units(g) row tiles of cost(g) (>= 1) each,
// repeated for `segments` column segments, in the order segment, group, tile. Part `part` of
// `parts` owns the units whose starting cost lies in [total * part / parts, total * (part + 1) /
// parts); visit(segment, group, tile_begin, tile_end) is called for each of its runs.
template <class Units, class Cost, class Visit>
void for_each_run(int64_t groups, int64_t segments, Units&& units, Cost&& cost, int64_t part, int64_t parts,
                  Visit&& visit) {
  int64_t per_segment = 0;
  for (int64_t g = 0; g < groups; ++g) per_segment += units(g) * cost(g);
  const int64_t total = per_segment * segments;
  const int64_t low = total * part / parts, high = total * (part + 1) / parts;
  for (int64_t s = 0; s < segments; ++s) {
    int64_t base = s * per_segment;
    if (base >= high) return;
    if (base + per_segment <= low) continue;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t count = units(g), unit_cost = cost(g), end_cost = base + count * unit_cost;
      if (base >= high) return;
      if (count > 0 && end_cost > low) {
        int64_t begin = low <= base ? 0 : ceil_div(low - base, unit_cost);
        int64_t end = min64(count, ceil_div(high - base, unit_cost));
        if (begin < end) visit(s, g, begin, end);
      }
      base = end_cost;
    }
  }
}

// Runs `work(part, parts)` on the thread pool, or inline when the product is small.
template <class Work>
void run_parts(double flops, Work&& work) {
  const int64_t threads = flops < 2e5 ? 1 : num_threads();
  if (threads <= 1) return work(0, 1);
  parallel_for(threads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) work(part, threads);
  });
}

// An operand shifted by `elements` (of its own dtype).
inline Operand shifted(Operand x, int64_t elements) {
  x.data = static_cast<const char*>(x.data) + elements * (x.bf16 ? 2 : 4);
  return x;
}

// c_e = a_e @ bt_e^T for every expert e, where a_e is rows [offsets[e], offsets[e+1]) of a
// (rows, k), bt_e is expert e's (n, k) matrix of bt, and c_e the same rows of c (rows, n).
struct RowGroupedProduct {
  Operand a, bt;  // bt.batch_stride: between experts
  float* c = nullptr;
  int64_t ldc = 0;
  const int64_t* offsets = nullptr;
  int64_t experts = 0, n = 0, k = 0;
  bool accumulate = false;
};

// Rows [row0, row1) x columns [n0, n1) of expert e's forward product without packing. Experts
// with at most kGroupedMatmulUnpackedRows rows take this path: at Qwen3-30B-A3B shapes (16 rows
// per expert on average) it took the forward from 0.43 to 0.57 of dense matmul's throughput;
// all-unpacked measured the same, so the packed GEMM keeps the large experts. The dx product
// stays packed: an unpacked strip kernel reads w[e] down its columns (a page per row) and
// measured no better.
inline void run_direct(const RowGroupedProduct& p, int64_t e, int64_t row0, int64_t row1, int64_t n0, int64_t n1) {
  const int64_t first = p.offsets[e] + row0;
  float* y = p.c + first * p.ldc;
  if (p.a.bf16) {
    const uint16_t* x = static_cast<const uint16_t*>(p.a.data) + first * p.a.row_stride;
    const uint16_t* w = static_cast<const uint16_t*>(p.bt.data) + e * p.bt.batch_stride;
    grouped_direct::rows_times_weight_t(x, p.a.row_stride, w, p.bt.row_stride, row1 - row0, p.k, n0, n1, y, p.ldc,
                                        p.accumulate);
  } else {
    const float* x = static_cast<const float*>(p.a.data) + first * p.a.row_stride;
    const float* w = static_cast<const float*>(p.bt.data) + e * p.bt.batch_stride;
    grouped_direct::rows_times_weight_t(x, p.a.row_stride, w, p.bt.row_stride, row1 - row0, p.k, n0, n1, y, p.ldc,
                                        p.accumulate);
  }
}

inline constexpr int64_t kPrefetchRows = 64;

// Path: a BLIS path of matmul_gemm.h (each run is gemm_range: A packed per block, B per block),
// or an in-place form of matmul_gemm_in_place.h for a row-major A that Path::applies_to (each run
// is gemm_a_in_place_range: A read from its rows, B packed one panel over all of K at a time).
template <class Path>
void run_row_grouped(const RowGroupedProduct& p, const MatmulCpuConfig& config) {
  constexpr int MR = Path::kMR, NR = Path::kNR;
  const int64_t rows = p.offsets[p.experts];
  if (rows == 0 || p.n == 0) return;
  auto group_rows = [&](int64_t e) { return p.offsets[e + 1] - p.offsets[e]; };
  auto units = [&](int64_t e) { return ceil_div(group_rows(e), MR); };
  auto unit_cost = [](int64_t) { return int64_t{1}; };
  int64_t row_tiles = 0;
  for (int64_t e = 0; e < p.experts; ++e) row_tiles += units(e);
  const int64_t n_tiles = ceil_div(p.n, NR);
  run_parts(2.0 * rows * p.n * (p.k + 1), [&](int64_t part, int64_t parts) {
    ThreadSetup<Path> setup;
    // Split columns when rows are too few for every thread, or when the rows (A) are fewer than
    // the columns (B): the extra packing is then of A, not of B.
    const int64_t segments = parts > 1 && (row_tiles < parts || rows < p.n) ? min64(parts, n_tiles) : 1;
    for_each_run(p.experts, segments, units, unit_cost, part, parts,
                 [&](int64_t segment, int64_t e, int64_t tile_begin, int64_t tile_end) {
                   const int64_t n0 = min64(p.n, n_tiles * segment / segments * NR);
                   const int64_t n1 = min64(p.n, n_tiles * (segment + 1) / segments * NR);
                   const int64_t row0 = tile_begin * MR, row1 = min64(group_rows(e), tile_end * MR);
                   if (!p.bt.transposed && group_rows(e) <= kGroupedMatmulUnpackedRows)
                     return run_direct(p, e, row0, row1, n0, n1);
                   Gemm g;
                   g.a = shifted(p.a, p.offsets[e] * p.a.row_stride);
                   g.bt = shifted(p.bt, e * p.bt.batch_stride);
                   g.c = p.c + p.offsets[e] * p.ldc;
                   g.ldc = p.ldc;
                   g.m = group_rows(e);
                   g.n = p.n;
                   g.k = p.k;
                   g.accumulate = p.accumulate;
                   if constexpr (InPlaceForm<Path>) {
                     gemm_a_in_place_range<Path>(g, row0, row1, n0, n1);
                   } else {
                     // Few rows leave the packing unamortised: fetch the next block during the
                     // tiles. Many rows hide it anyway, and the prefetched lines would evict the
                     // packed block from L2 (Mixtral-scaled dx, 128 rows per expert: 0.82 -> 0.75).
                     g.prefetch_next_b = group_rows(e) <= kPrefetchRows;
                     gemm_range<Path>(g, config, 0, row0, row1, n0, n1);
                   }
                 });
  });
}

// dw[e] (n, k) = dy_e^T @ x_e for every expert: depth is the expert's row count.
struct DepthGroupedProduct {
  Operand dy_t, x_t;  // dy and x read transposed: (n, rows) and (k, rows)
  float* dw = nullptr;
  int64_t dw_expert_stride = 0, ldc = 0;
  const int64_t* offsets = nullptr;
  int64_t experts = 0, n = 0, k = 0;
  bool accumulate = false;
};

template <class Path>
void run_depth_grouped(const DepthGroupedProduct& p, const MatmulCpuConfig& config) {
  constexpr int MR = Path::kMR, NR = Path::kNR;
  if (p.experts == 0 || p.n == 0 || p.k == 0) return;
  auto group_rows = [&](int64_t e) { return p.offsets[e + 1] - p.offsets[e]; };
  const int64_t n_tiles = ceil_div(p.n, MR), k_tiles = ceil_div(p.k, NR);
  auto units = [&](int64_t) { return n_tiles; };
  // A tile's cost is its depth plus about two depth steps for loading and storing it.
  auto unit_cost = [&](int64_t e) { return group_rows(e) + 2; };
  // dw is written once, every expert's block in full: beyond the caches, non-temporal stores save
  // the read for ownership of each line (half the DRAM traffic of a store-bound product).
  const bool streaming = !p.accumulate && 4.0 * p.experts * p.n * p.k > 16e6;
  run_parts(2.0 * p.offsets[p.experts] * p.n * p.k + 2.0 * p.experts * p.n * p.k, [&](int64_t part, int64_t parts) {
    ThreadSetup<Path> setup;
    const int64_t segments = parts > 1 && p.experts * n_tiles < parts ? min64(parts, k_tiles) : 1;
    for_each_run(p.experts, segments, units, unit_cost, part, parts,
                 [&](int64_t segment, int64_t e, int64_t tile_begin, int64_t tile_end) {
                   const int64_t depth = group_rows(e);
                   if (depth == 0 && p.accumulate) return;  // dw[e] += 0
                   Gemm g;
                   g.a = shifted(p.dy_t, p.offsets[e] * p.dy_t.row_stride);
                   g.bt = shifted(p.x_t, p.offsets[e] * p.x_t.row_stride);
                   g.c = p.dw + e * p.dw_expert_stride;
                   g.ldc = p.ldc;
                   g.m = p.n;
                   g.n = p.k;
                   g.k = depth;
                   g.accumulate = p.accumulate;
                   g.streaming_c = streaming;
                   const int64_t k0 = min64(p.k, k_tiles * segment / segments * NR);
                   const int64_t k1 = min64(p.k, k_tiles * (segment + 1) / segments * NR);
                   gemm_range<Path>(g, config, 0, tile_begin * MR, min64(p.n, tile_end * MR), k0, k1);
                 });
    if (streaming) simd::streaming_fence();
  });
}

inline RowGroupedProduct forward_product(const GroupedMatmulArgs& args) {
  RowGroupedProduct p;
  p.a = operand(args.x, false);
  p.bt = operand(args.w, false);  // w[e] (n, k) is bt as stored
  p.bt.batch_stride = args.w.stride(0);
  p.c = static_cast<float*>(args.y.data);
  p.ldc = args.y.stride(0);
  p.offsets = static_cast<const int64_t*>(args.group_offsets.data);
  p.experts = args.w.dim(0);
  p.n = args.w.dim(1);
  p.k = args.w.dim(2);
  p.accumulate = args.accumulate;
  return p;
}

inline RowGroupedProduct dx_product(const GroupedMatmulBackwardArgs& args) {
  RowGroupedProduct p;
  p.a = operand(args.dy, false);
  p.bt = operand(args.w, true);  // bt_e = w[e]^T, (k, n)
  p.bt.batch_stride = args.w.stride(0);
  p.c = static_cast<float*>(args.dx.data);
  p.ldc = args.dx.stride(0);
  p.offsets = static_cast<const int64_t*>(args.group_offsets.data);
  p.experts = args.w.dim(0);
  p.n = args.w.dim(2);
  p.k = args.w.dim(1);
  return p;
}

inline DepthGroupedProduct dw_product(const GroupedMatmulBackwardArgs& args) {
  DepthGroupedProduct p;
  p.dy_t = operand(args.dy, true);
  p.x_t = operand(args.x, true);
  p.dw = static_cast<float*>(args.dw.data);
  p.dw_expert_stride = args.dw.stride(0);
  p.ldc = args.dw.stride(1);
  p.offsets = static_cast<const int64_t*>(args.group_offsets.data);
  p.experts = args.w.dim(0);
  p.n = args.w.dim(1);
  p.k = args.w.dim(2);
  p.accumulate = args.accumulate_dw;
  return p;
}

// RowPath for dx (a BLIS path, or an in-place form where dx_product's operands allow it),
// DepthPath (a BLIS path) for dw.
template <class RowPath, class DepthPath = RowPath>
void run_backward(const GroupedMatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  if (args.dx.data) run_row_grouped<RowPath>(dx_product(args), config);
  if (args.dw.data) run_depth_grouped<DepthPath>(dw_product(args), config);
}

}  // namespace lathe::LATHE_ISA_NS::grouped
