// GPT-OSS's clamped SwiGLU on interleaved gate/up columns (transformers' GptOssExperts._apply_gate,
// modeling_gpt_oss.py:69-75):
//   g = min(gate, limit), u = clamp(up, -limit, limit), out = (u + 1) * g * sigmoid(alpha * g)
// with gate j in column 2j and up j in column 2j + 1 of gate_up. Backward (the clamps pass no
// gradient outside their bounds; the bounds themselves inclusive, as torch.clamp):
//   d_gate = gate <= limit ? dy * (u + 1) * (s + alpha * g * s * (1 - s)) : 0,   s = sigmoid(alpha * g)
//   d_up   = -limit <= up <= limit ? dy * g * s : 0
// gate_up, d_gate_up: (rows, 2 * ffn) f32; out, dy: (rows, ffn) f32; all contiguous.
// Errors (lathe::Error): wrong rank, shape or dtype, an odd gate_up width, a non-contiguous tensor.
// Determinism: elementwise, one writer per element: the same bits for every thread count.
// On the GPU: clamped_swiglu_cuda.h ("cuda_emulated" runs its kernels on the host).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct ClampedSwigluArgs {
  TensorView gate_up;                 // (rows, 2 * ffn) f32, interleaved
  TensorView out;                     // (rows, ffn) f32 output
  double alpha = 1.702, limit = 7.0;  // the kernels compute in f32, the references in T
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(gate_up), visit(out);
  }
};

struct ClampedSwigluBackwardArgs {
  TensorView gate_up;                 // (rows, 2 * ffn) f32, as in the forward
  TensorView dy;                      // (rows, ffn) f32
  TensorView d_gate_up;               // (rows, 2 * ffn) f32 output, interleaved like gate_up
  double alpha = 1.702, limit = 7.0;  // the kernels compute in f32, the references in T
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(gate_up), visit(dy), visit(d_gate_up);
  }
};

// No tunable parameter: elementwise, split over rows.
struct ClampedSwigluConfig {
  template <class Visit>
  void visit(Visit&&) {}
};

void clamped_swiglu(const ClampedSwigluArgs& args, const Dispatch& dispatch = {});
void clamped_swiglu_backward(const ClampedSwigluBackwardArgs& args, const Dispatch& dispatch = {});
void validate(const ClampedSwigluArgs& args);
void validate(const ClampedSwigluBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline).
template <class T>
void clamped_swiglu_reference(const ClampedSwigluArgs& args);
template <class T>
void clamped_swiglu_backward_reference(const ClampedSwigluBackwardArgs& args);

OpCost clamped_swiglu_cost(const ClampedSwigluArgs& args);
OpCost clamped_swiglu_backward_cost(const ClampedSwigluBackwardArgs& args);
const Op<ClampedSwigluArgs, ClampedSwigluConfig>& clamped_swiglu_op();
const Op<ClampedSwigluBackwardArgs, ClampedSwigluConfig>& clamped_swiglu_backward_op();

}  // namespace lathe
