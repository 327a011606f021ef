// Softmax over the last axis (attention probabilities, output distributions), with an optional
// scale applied to the inputs first (attention's 1/sqrt(head_dim)):
//   y[r, c]  = exp(scale * (x[r, c] - max_c x[r, :])) / sum_c exp(scale * (x[r, c] - max_c x[r, :]))
// which equals softmax(scale * x) for scale > 0 and never overflows (the row max is subtracted).
// -inf inputs (masked positions) get probability 0. A row whose inputs are all -inf (fully masked)
// gets y = 0 everywhere, not NaN: it has no probability mass, so it contributes nothing
// downstream, and its backward gives dx = 0. A +inf or NaN input makes its row NaN.
// Backward, from the forward's output y:
//   dx[r, c] = scale * y[r, c] * (dy[r, c] - sum_c dy[r, c] * y[r, c])
// x, y, dy, dx are f32 or bf16 (all the same dtype).
// Errors (lathe::Error): wrong rank, shape, dtype, non-contiguous tensors, scale not > 0.
// Each row is computed by one thread in a fixed order: results are bitwise reproducible for any
// thread count.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct SoftmaxArgs {
  TensorView x;  // (rows, cols)
  TensorView y;  // (rows, cols)  output
  float scale = 1.0f;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(y);
  }
};

struct SoftmaxBackwardArgs {
  TensorView y;   // (rows, cols) the forward's output
  TensorView dy;  // (rows, cols)
  TensorView dx;  // (rows, cols) output
  float scale = 1.0f;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(y), visit(dy), visit(dx);
  }
};

struct SoftmaxCpuConfig {
  int64_t rows_per_task = 16;    // rows per parallel chunk (smaller: better balance, more overhead)
  int64_t streaming_stores = 0;  // 1: non-temporal stores for the large outputs (beyond the caches)
  template <class Visit>
  void visit(Visit&& field) {
    field("rows_per_task", rows_per_task);
    field("streaming_stores", streaming_stores);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void softmax(const SoftmaxArgs& args, const Dispatch& dispatch = {});
void softmax_backward(const SoftmaxBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape or dtype.
void validate(const SoftmaxArgs& args);
void validate(const SoftmaxBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline), any dtypes.
template <class T>
void softmax_reference(const SoftmaxArgs& args);
template <class T>
void softmax_backward_reference(const SoftmaxBackwardArgs& args);

OpCost softmax_cost(const SoftmaxArgs& args);
OpCost softmax_backward_cost(const SoftmaxBackwardArgs& args);

const Op<SoftmaxArgs, SoftmaxCpuConfig>& softmax_op();
const Op<SoftmaxBackwardArgs, SoftmaxCpuConfig>& softmax_backward_op();

}  // namespace lathe
