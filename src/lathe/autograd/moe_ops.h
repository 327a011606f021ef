// Differentiable mixture-of-experts ops over the kernel library's MoE ops (ops/moe_router,
// ops/moe_permute, ops/grouped_matmul, ops/moe_combine), in the style of autograd/ops.h: each runs
// the fast op (or its float64 reference, per the tape's precision) and records the op's own
// backward. A routed feed-forward is
//   logits   = linear(x, router)                     (tokens, experts)
//   routed   = moe_route(logits)                     weights (tokens, k), expert_ids (tokens, k)
//   permuted = moe_permute(x, routed.expert_ids)     (tokens * k, d), rows grouped by expert
//   gate_up  = grouped_linear(permuted, w_gate_up)   (tokens * k, 2 * ffn)
//   hidden   = gated_activation_fused(gate_up)       (tokens * k, ffn)
//   out      = grouped_linear(hidden, w_down)        (tokens * k, d)
//   y        = moe_combine(out, routed.weights)      (tokens, d)
// (models/moe_layer.h composes exactly this). Token ids and routing decisions are plain tensors:
// the top-k choice is piecewise constant and carries no gradient.
#pragma once

#include <memory>

#include "lathe/autograd/router_losses.h"
#include "lathe/autograd/tape.h"
#include "lathe/ops/gated_activation/gated_activation.h"
#include "lathe/ops/moe_router/moe_router.h"

namespace lathe::autograd {

struct RoutedTokens {
  Var weights;        // (tokens, top_k): combine weights, differentiable w.r.t. the logits
  Tensor expert_ids;  // (tokens, top_k) i32, best first
  Tensor probs;       // (tokens, experts): the router probabilities (saved for the backward)
};

// logits: (tokens, experts) -> the top-k routing (ops/moe_router.h). selection_bias (experts), may
// be undefined, moves the choice only. When `losses` is given, this router's rows are recorded as
// MoE layer `loss_index` of the router losses, and the backward adds their gradients.
RoutedTokens moe_route(Tape& tape, const Var& logits, const Tensor& selection_bias, const MoeRouterOptions& options,
                       const std::shared_ptr<RouterLosses>& losses, int64_t loss_index);

struct PermutedTokens {
  Var rows;              // (tokens * top_k, d): x's rows grouped by expert
  Tensor group_offsets;  // (experts + 1) i64: expert e's rows are [offsets[e], offsets[e + 1])
  Tensor destination;    // (tokens * top_k) i32: slot t * top_k + j's row in `rows`
};

// x: (tokens, d), expert_ids: (tokens, top_k) i32 -> the dropless permutation (ops/moe_permute.h).
// rows bf16 (bf16 training, where the rows' only reader is a bf16 grouped product): the rows are
// x's bf16 copy permuted, a bf16 value (gradient f32): the same bits as rounding the f32 rows,
// without the rounding pass over top_k copies of every token.
PermutedTokens moe_permute(Tape& tape, const Var& x, const Tensor& expert_ids, int64_t n_experts,
                           DType rows = DType::f32);

// x: (rows, in) grouped by expert; weight: (experts, out, in) -> (rows, out), each group times its
// expert's weight transposed (ops/grouped_matmul.h). Like linear: stashed under save_matmuls, and
// bf16 products (f32 accumulation) when the weight carries a bf16 copy.
Var grouped_linear(Tape& tape, const Var& x, const Var& weight, const Tensor& group_offsets);

// gate_up: (rows, 2 * ffn), gate columns then up columns -> act(gate) * up (rows, ffn), reading the
// two halves in place (no split copy). output bf16: as autograd::gated_activation's (a bf16 value for
// a bf16 product, a bf16 gradient for the bf16 product that made gate_up).
Var gated_activation_fused(Tape& tape, const Var& gate_up, GatedActivation activation, DType output = DType::f32);

// expert_out: (tokens * top_k, d) in permuted order; weights: (tokens, top_k) -> (tokens, d), the
// weighted sum of each token's expert outputs (ops/moe_combine.h).
Var moe_combine(Tape& tape, const Var& expert_out, const Var& weights, const Tensor& destination);

}  // namespace lathe::autograd
