// The gated activation of a gated MLP: out = act(gate) * up, elementwise, with
//   silu:      act(g) = g * sigmoid(g)                                   (SwiGLU: Llama, Qwen, Mistral)
//   gelu_tanh: act(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))  (GeGLU: Gemma's gelu_pytorch_tanh)
//   sigmoid:   act(g) = sigmoid(g)                                         (the original GLU: Qwen3-Next's
//                                                                            attention output gate)
// Backward: dgate = dout * up * act'(gate), dup = dout * act(gate).
// All tensors are (rows, ffn); rows may be strided (the last axis must be contiguous), so gate and
// up can be column slices of one fused gate_up projection. Inputs (gate, up, dout) are all f32 or
// all bf16; outputs (out, or dgate and dup) have the inputs' dtype, or are bf16 from f32 inputs:
// the f32 result rounded once to nearest even, the bits of rounding an f32 output afterwards (bf16
// training writes the down projection's input and the gate/up projections' output gradients so).
// Results do not depend on the thread count.
// Errors: mismatched shapes or dtypes, a non-unit stride on the last axis.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

enum class GatedActivation { silu, gelu_tanh, sigmoid };
const char* gated_activation_name(GatedActivation activation);  // "silu", "gelu_tanh", "sigmoid"

struct GatedActivationArgs {
  TensorView gate;  // (rows, ffn)
  TensorView up;    // (rows, ffn)
  TensorView out;   // (rows, ffn) output
  GatedActivation activation = GatedActivation::silu;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(gate), visit(up), visit(out);
  }
};

struct GatedActivationBackwardArgs {
  TensorView gate;   // (rows, ffn)
  TensorView up;     // (rows, ffn)
  TensorView dout;   // (rows, ffn)
  TensorView dgate;  // (rows, ffn) output
  TensorView dup;    // (rows, ffn) output
  GatedActivation activation = GatedActivation::silu;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(gate), visit(up), visit(dout), visit(dgate), visit(dup);
  }
};

struct GatedActivationCpuConfig {
  int64_t elements_per_task = 32768;  // contiguous elements (whole rows when rows are strided) per chunk
  template <class Visit>
  void visit(Visit&& field) {
    field("elements_per_task", elements_per_task);
  }
};

void gated_activation(const GatedActivationArgs& args, const Dispatch& dispatch = {});
void gated_activation_backward(const GatedActivationBackwardArgs& args, const Dispatch& dispatch = {});

void validate(const GatedActivationArgs& args);
void validate(const GatedActivationBackwardArgs& args);

template <class T>
void gated_activation_reference(const GatedActivationArgs& args);
template <class T>
void gated_activation_backward_reference(const GatedActivationBackwardArgs& args);

OpCost gated_activation_cost(const GatedActivationArgs& args);
OpCost gated_activation_backward_cost(const GatedActivationBackwardArgs& args);

const Op<GatedActivationArgs, GatedActivationCpuConfig>& gated_activation_op();
const Op<GatedActivationBackwardArgs, GatedActivationCpuConfig>& gated_activation_backward_op();

}  // namespace lathe
