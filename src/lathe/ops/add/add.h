// Elementwise scaled addition, the residual connection of every transformer block and the
// gradient accumulation of the autograd tape:
//   out = a + alpha * b     (one fused multiply-add)
//   out = alpha * b         (a absent, data == nullptr: a scaling, e.g. Gemma 4's constant multipliers)
// a, b, out: the same shape (any rank), contiguous, all f32 or all bf16 (math in f32, bf16 rounded
// to nearest-even). out may alias a or b (in-place accumulation).
// Elementwise, so results do not depend on the thread count.
// Errors: shape or dtype mismatch, non-contiguous tensors, non-finite alpha.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct AddArgs {
  TensorView a;    // (...) any shape; data may be null (out = alpha * b)
  TensorView b;    // same shape as out
  TensorView out;  // same shape as a, output; may alias a or b
  float alpha = 1.0f;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(a), visit(b), visit(out);
  }
};

struct AddCpuConfig {
  int64_t elements_per_task = 65536;  // contiguous elements per parallel chunk
  template <class Visit>
  void visit(Visit&& field) {
    field("elements_per_task", elements_per_task);
  }
};

void add(const AddArgs& args, const Dispatch& dispatch = {});
void validate(const AddArgs& args);
// Plain loop computing in T (double: the oracle; float: the naive baseline), any dtypes.
template <class T>
void add_reference(const AddArgs& args);
OpCost add_cost(const AddArgs& args);
const Op<AddArgs, AddCpuConfig>& add_op();

}  // namespace lathe
