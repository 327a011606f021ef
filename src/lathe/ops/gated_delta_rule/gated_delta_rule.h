// Gated delta rule (Gated DeltaNet; the linear-attention layers of Qwen3-Next and Qwen3.5), the
// math of transformers' torch_recurrent_gated_delta_rule / torch_chunk_gated_delta_rule. Per
// batch b and value head h (key head h / (Hv / Hk), GQA-style), with state S (Dk, Dv):
//   q~ = l2norm(q) * scale,  k~ = l2norm(k)     l2norm(x) = x / sqrt(sum x^2 + 1e-6) when
//                                                 options.l2norm_qk, else x itself
//   S  = exp(g_t) S                              decay (g <= 0, log space)
//   S += k~ (beta_t (v_t - S^T k~))^T            the delta rule: write only the correction
//   o_t = S^T q~
// scale = options.scale, or 1 / sqrt(Dk) when 0 (transformers always uses 1 / sqrt(Dk)); it is
// applied after the normalisation, as transformers does. S starts at initial_state (zeros when
// absent); final_state receives S after the last token and may alias initial_state: a decode step
// (T = 1, or any T) then updates the state cache in place.
// The fast path is the chunked parallel form (UT transform / WY representation, chunk size a
// config, 32 by default): per chunk, T = (I + strict_tril(diag(beta) K K^T * decay))^-1 condenses
// the chunk's rank-1 updates into small GEMMs; chunks follow each other through the state. The
// float64 reference is the plain token-by-token recurrence above (a different algorithm).
// Backward gives dq, dk (summed over the value heads sharing a key head), dv, dg, dbeta and
// d_initial_state (when initial_state is given), from do and d_final_state (optional: zero).
// f32 tensors, contiguous. Each (batch, head) is computed by one task in a fixed order (the
// backward: each (batch, key head) with its value heads in order): results are bitwise
// reproducible for any thread count.
// Errors: lathe::Error naming the op and argument for wrong ranks, shapes, dtypes, strides, value
// heads not a multiple of key heads, or a scale that is negative or not finite.
// Implementations: the CPU kernels (chunked, gated_delta_rule_kernels.cc) and, in builds with the
// CUDA backend, the token-by-token recurrence on the GPU (gated_delta_rule_cuda.cu over
// gated_delta_rule_cuda_body.h, which "cuda_emulated" runs on the host; dk <= 256, dv <= 1024).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct GatedDeltaRuleOptions {
  bool l2norm_qk = false;  // L2-normalise q and k inside the op (Qwen3-Next: use_qk_l2norm_in_kernel)
  float scale = 0.0f;      // query scale; 0: 1 / sqrt(Dk)
};

constexpr double kGatedDeltaRuleNormEps = 1e-6;  // transformers' l2norm eps (inside the square root)

struct GatedDeltaRuleArgs {
  TensorView q;              // (B, T, Hk, Dk)
  TensorView k;              // (B, T, Hk, Dk)
  TensorView v;              // (B, T, Hv, Dv)   Hv a multiple of Hk
  TensorView g;              // (B, T, Hv)       log decay, <= 0
  TensorView beta;           // (B, T, Hv)       in (0, 1)
  TensorView initial_state;  // (B, Hv, Dk, Dv)  optional (data == nullptr: zeros)
  TensorView o;              // (B, T, Hv, Dv)   output
  TensorView final_state;    // (B, Hv, Dk, Dv)  optional output; may alias initial_state
  GatedDeltaRuleOptions options;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(q), visit(k), visit(v), visit(g), visit(beta), visit(initial_state), visit(o), visit(final_state);
  }
};

struct GatedDeltaRuleBackwardArgs {
  TensorView q, k;             // (B, T, Hk, Dk)   the forward's inputs
  TensorView v;                // (B, T, Hv, Dv)
  TensorView g, beta;          // (B, T, Hv)
  TensorView initial_state;    // (B, Hv, Dk, Dv)  optional
  TensorView d_o;              // (B, T, Hv, Dv)   gradient of o
  TensorView d_final_state;    // (B, Hv, Dk, Dv)  optional (absent: zero)
  TensorView dq, dk;           // (B, T, Hk, Dk)   outputs
  TensorView dv;               // (B, T, Hv, Dv)   output
  TensorView dg, dbeta;        // (B, T, Hv)       outputs
  TensorView d_initial_state;  // (B, Hv, Dk, Dv)  output, required exactly when initial_state is given
  GatedDeltaRuleOptions options;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(q), visit(k), visit(v), visit(g), visit(beta), visit(initial_state), visit(d_o), visit(d_final_state);
    visit(dq), visit(dk), visit(dv), visit(dg), visit(dbeta), visit(d_initial_state);
  }
};

struct GatedDeltaRuleCpuConfig {
  int64_t chunk = 32;  // tokens per chunk of the parallel form (the cost counts this default)
  // Backward only: how many of the last chunks keep their prepared quantities from the forward
  // sweep for the reverse sweep (the others are prepared twice); -1: as many as fit in 8 MiB per
  // thread.
  int64_t saved_chunks = -1;
  template <class Visit>
  void visit(Visit&& field) {
    field("chunk", chunk);
    field("saved_chunks", saved_chunks);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void gated_delta_rule(const GatedDeltaRuleArgs& args, const Dispatch& dispatch = {});
void gated_delta_rule_backward(const GatedDeltaRuleBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape, dtype or stride.
void validate(const GatedDeltaRuleArgs& args);
void validate(const GatedDeltaRuleBackwardArgs& args);

// The token-by-token recurrence in T (double: the oracle; float: the naive baseline); the
// backward stores every state and runs the recurrence's reverse mode.
template <class T>
void gated_delta_rule_reference(const GatedDeltaRuleArgs& args);
template <class T>
void gated_delta_rule_backward_reference(const GatedDeltaRuleBackwardArgs& args);

// FLOPs of the chunked algorithm at the default chunk (triangular products counted at half),
// minimum bytes of inputs and outputs.
OpCost gated_delta_rule_cost(const GatedDeltaRuleArgs& args);
OpCost gated_delta_rule_backward_cost(const GatedDeltaRuleBackwardArgs& args);

const Op<GatedDeltaRuleArgs, GatedDeltaRuleCpuConfig>& gated_delta_rule_op();
const Op<GatedDeltaRuleBackwardArgs, GatedDeltaRuleCpuConfig>& gated_delta_rule_backward_op();

}  // namespace lathe
