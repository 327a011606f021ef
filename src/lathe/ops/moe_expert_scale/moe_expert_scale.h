// MoE per-expert scale (Gemma 4's router: per_expert_scale on the renormalised top-k weights):
//   out[t, k] = weights[t, k] * scale[expert_ids[t, k]]
// Backward:
//   d_weights[t, k] = dy[t, k] * scale[expert_ids[t, k]]
//   d_scale[e]      = sum over the slots s routed to e, in slot order, of dy[s] * weights[s]  (in f32)
// Either backward output may be absent (data == nullptr). weights, dy, out: (tokens, top_k) f32;
// scale, d_scale: (experts) f32; expert_ids: (tokens, top_k) i32 in [0, experts).
// Errors (lathe::Error): wrong rank, shape, dtype, non-contiguous tensors, an id outside
// [0, experts) named by position and value.
// Determinism: each output element has one writer and a fixed order of operations (d_scale sums in
// slot order), so results are bitwise identical for every thread count, config and ISA level.
// On the GPU: moe_expert_scale_cuda.h ("cuda_emulated" runs its kernels on the host).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct MoeExpertScaleArgs {
  TensorView weights;     // (tokens, top_k) f32
  TensorView scale;       // (experts) f32
  TensorView expert_ids;  // (tokens, top_k) i32
  TensorView out;         // (tokens, top_k) f32 output
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(weights), visit(scale), visit(expert_ids), visit(out);
  }
};

struct MoeExpertScaleBackwardArgs {
  TensorView dy;          // (tokens, top_k) f32
  TensorView weights;     // (tokens, top_k) f32, as in the forward
  TensorView scale;       // (experts) f32, as in the forward
  TensorView expert_ids;  // (tokens, top_k) i32, as in the forward
  TensorView d_weights;   // (tokens, top_k) f32 output, optional (data may be null)
  TensorView d_scale;     // (experts) f32 output, optional (data may be null)
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(dy), visit(weights), visit(scale), visit(expert_ids), visit(d_weights), visit(d_scale);
  }
};

struct MoeExpertScaleCpuConfig {
  int64_t slots_per_task = 4096;  // minimum (token, k) slots per parallel chunk
  template <class Visit>
  void visit(Visit&& field) {
    field("slots_per_task", slots_per_task);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void moe_expert_scale(const MoeExpertScaleArgs& args, const Dispatch& dispatch = {});
void moe_expert_scale_backward(const MoeExpertScaleBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape or dtype, or the bad id.
void validate(const MoeExpertScaleArgs& args);
void validate(const MoeExpertScaleBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline).
template <class T>
void moe_expert_scale_reference(const MoeExpertScaleArgs& args);
template <class T>
void moe_expert_scale_backward_reference(const MoeExpertScaleBackwardArgs& args);

OpCost moe_expert_scale_cost(const MoeExpertScaleArgs& args);
OpCost moe_expert_scale_backward_cost(const MoeExpertScaleBackwardArgs& args);

const Op<MoeExpertScaleArgs, MoeExpertScaleCpuConfig>& moe_expert_scale_op();
const Op<MoeExpertScaleBackwardArgs, MoeExpertScaleCpuConfig>& moe_expert_scale_backward_op();

}  // namespace lathe
