// Column sums of a matrix, accumulated in f64 with the rows in order: the gradient of a bias added
// to every row (autograd's linear with a bias: Qwen2's q/k/v projections).
//   out[j] = (accumulate ? out[j] : 0) + (f32) sum_i x[i, j]
// x: (rows, cols) f32, contiguous; out: (cols) f32, contiguous (read when accumulate).
// Each column is summed by one thread in row order in f64 and rounded to f32 once, on the CPU and
// on the GPU alike: the same bits for any thread count, config and device.
// Errors: x not a contiguous f32 matrix; out not a contiguous (cols) f32 vector.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct ColumnSumsArgs {
  TensorView x;    // (rows, cols) f32
  TensorView out;  // (cols) f32
  bool accumulate = false;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(out);
  }
};

// No tunable parameter: the order of the sums fixes the result's bits.
struct ColumnSumsConfig {
  template <class Visit>
  void visit(Visit&&) {}
};

void column_sums(const ColumnSumsArgs& args, const Dispatch& dispatch = {});
void validate(const ColumnSumsArgs& args);
// Plain loop in T (double: the oracle; float: the naive baseline).
template <class T>
void column_sums_reference(const ColumnSumsArgs& args);
OpCost column_sums_cost(const ColumnSumsArgs& args);
const Op<ColumnSumsArgs, ColumnSumsConfig>& column_sums_op();

}  // namespace lathe
