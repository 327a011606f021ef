// Elementwise conversion between f32 and bf16 (round to nearest-even, NaN stays NaN), on whichever
// device the tensors live: the bf16 training path's conversions (the weights' bf16 copies, the
// activations and gradients at every linear layer, attention's inputs and outputs) run where the
// step runs (autograd::converted, autograd/tape.h). On the host, core's convert() does the same
// for any layout and dtype pair; this op is its contiguous f32 <-> bf16 case with a CUDA twin.
//   out[i] = (out.dtype) in[i]
// in, out: the same shape (any rank), contiguous, each f32 or bf16 (equal dtypes: a copy).
// Elementwise: results do not depend on the thread count; CPU and CUDA give the same bits (NaN
// payloads aside).
// Errors: shape mismatch, another dtype, non-contiguous tensors.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct CastArgs {
  TensorView in;   // (...) f32 or bf16
  TensorView out;  // in's shape, f32 or bf16
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(in), visit(out);
  }
};

struct CastCpuConfig {
  int64_t elements_per_task = 65536;  // contiguous elements per parallel chunk
  template <class Visit>
  void visit(Visit&& field) {
    field("elements_per_task", elements_per_task);
  }
};

void cast(const CastArgs& args, const Dispatch& dispatch = {});
void validate(const CastArgs& args);
// Element by element through double (the oracle; T only names the precision of the baseline).
template <class T>
void cast_reference(const CastArgs& args);
OpCost cast_cost(const CastArgs& args);
const Op<CastArgs, CastCpuConfig>& cast_op();

}  // namespace lathe
