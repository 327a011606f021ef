// Grouped matrix multiplication (the "ragged dot" of a mixture-of-experts layer): the rows of x
// are grouped by expert (moe_permute's output) and each group is multiplied by its expert's
// weight, stored in Linear layout (out, in):
//   y[r] = x[r] @ w[e(r)]^T          for r in [offsets[e], offsets[e+1])   (y += with accumulate)
// grouped_matmul_backward computes any of
//   dx[r] = dy[r] @ w[e(r)]
//   dw[e] = dy_e^T @ x_e             (dw += with accumulate_dw; zero for an expert with no rows)
// where x_e, dy_e are the rows of expert e.
//
// Dtypes: x and w are both f32 or both bf16; sums are accumulated in f32 and y, dx, dw are f32.
// dy is f32, or bf16 when x is bf16 (the bf16-matmul recipe rounds the output gradient once).
// Tensors need unit stride on their last axis; row strides are free (slices of wider buffers).
//
// Errors (lathe::Error naming the argument): wrong ranks or shapes, mixed x/w dtypes, offsets
// that are not i64 of length experts + 1, do not start at 0, decrease, or do not end at rows.
//
// Determinism: every output element is computed by one thread in a fixed order over K (dw: over
// the expert's rows, in order), so results are bitwise identical for any thread count. The work
// is one flat list of (expert, row tile, column segment) units, for dw (expert, N tile, K
// segment) weighted by the expert's row count, cut into equal-cost contiguous shares for the
// threads: one expert holding most rows is spread over every thread. The blocked GEMM (packing,
// register tiles) is matmul's (ops/matmul/matmul_gemm.h), and so is the config: MatmulCpuConfig.
// In the forward, an expert with at most kGroupedMatmulUnpackedRows rows skips the packing: its
// outputs are dot products of contiguous rows, summed lane-wise then across lanes (another order
// than the packed GEMM's, the same for any thread count).
// On the GPU (grouped_matmul_cuda.h): a loop over the experts, one cuBLASLt product each through
// matmul's CUDA implementation; group_offsets live on the device with the other tensors and are
// copied to the host by the validation and again by the run (two small synchronous copies a call).
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/op.h"

namespace lathe {

inline constexpr int64_t kGroupedMatmulUnpackedRows = 32;

struct GroupedMatmulArgs {
  TensorView x;              // (rows, K) f32 or bf16: rows grouped by expert (moe_permute's output)
  TensorView w;              // (experts, N, K), x's dtype: expert e's weight in Linear layout (out, in)
  TensorView group_offsets;  // (experts + 1) i64: expert e's rows are [offsets[e], offsets[e+1]); offsets[0] = 0,
                             // offsets[experts] = rows
  TensorView y;              // (rows, N) f32 output: y[r] = x[r] @ w[e(r)]^T  (f32 accumulation)
  bool accumulate = false;   // y += instead of =
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(w), visit(group_offsets), visit(y);
  }
};

struct GroupedMatmulBackwardArgs {
  TensorView x, w, group_offsets;  // as in the forward: (rows, K), (experts, N, K), (experts + 1) i64
  TensorView dy;                   // (rows, N): gradient of y (f32; bf16 allowed when x is bf16)
  TensorView dx;                   // (rows, K) f32 output, optional (data == nullptr): dx[r] = dy[r] @ w[e(r)]
  TensorView dw;  // (experts, N, K) f32 output, optional: dw[e] = dy_e^T @ x_e (zero for an expert with no rows)
  bool accumulate_dw = false;  // dw += (parameter gradients accumulate over micro-batches in the trainer)
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(w), visit(group_offsets), visit(dy), visit(dx), visit(dw);
  }
};

// group_offsets' values on the host (copied from the GPU where they live there: a synchronisation).
std::vector<int64_t> grouped_matmul_offsets(const TensorView& group_offsets);

// Validate, then run the best implementation (see Op::run for the config order).
void grouped_matmul(const GroupedMatmulArgs& args, const Dispatch& dispatch = {});
void grouped_matmul_backward(const GroupedMatmulBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape, dtype or offset.
void validate(const GroupedMatmulArgs& args);
void validate(const GroupedMatmulBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline).
template <class T>
void grouped_matmul_reference(const GroupedMatmulArgs& args);
template <class T>
void grouped_matmul_backward_reference(const GroupedMatmulBackwardArgs& args);

// FLOPs 2 * rows * N * K per product; bytes count only the weights of experts that have rows
// (the others need not be read), plus dw in full (it is written for every expert).
OpCost grouped_matmul_cost(const GroupedMatmulArgs& args);
OpCost grouped_matmul_backward_cost(const GroupedMatmulBackwardArgs& args);

const Op<GroupedMatmulArgs, MatmulCpuConfig>& grouped_matmul_op();
const Op<GroupedMatmulBackwardArgs, MatmulCpuConfig>& grouped_matmul_backward_op();

}  // namespace lathe
