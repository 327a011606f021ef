// The mixture-of-experts feed-forward every MoE family shares (Mixtral, Qwen2/3-MoE, OLMoE, and
// the DeepSeek and Gemma 4 layers built on it): a router picks top_k of moe_experts experts per
// token, the tokens are permuted into per-expert row groups, each expert is a gated MLP run as
// two grouped GEMMs, and the outputs are combined with the router's weights; an optional shared
// expert (a dense gated MLP every token passes through, optionally scaled by a sigmoid gate) is
// added. Built only from autograd ops (autograd/moe_ops.h); never looks at the family name.
//
//   logits  = x @ router^T                       (tokens, experts)
//   routing = top_k of softmax/sigmoid(logits)   ids, weights (tokens, top_k)   (model.moe_* options)
//   y[t]    = sum_j weights[t, j] * down_e(act(gate_e(x[t])) * up_e(x[t])),  e = ids[t, j]
//           + [sigmoid(x[t] . shared_gate)] * shared_mlp(x[t])
#pragma once

#include "lathe/autograd/moe_ops.h"
#include "lathe/models/family_spec.h"

namespace lathe {

// The weights moe_mlp reads (HF names in model_config.h); absent ones are null or point to a null Var.
struct MoeWeights {
  const autograd::Var* router;              // (experts, d_model)
  const autograd::Var* experts_gate_up;     // (experts, 2 * expert_ffn, d_model): gate rows, then up rows
  const autograd::Var* experts_down;        // (experts, d_model, expert_ffn)
  const autograd::Var* shared_gate_proj;    // (shared_ffn, d_model), moe_shared_ffn_dim > 0 only
  const autograd::Var* shared_up_proj;      // (shared_ffn, d_model)
  const autograd::Var* shared_down_proj;    // (d_model, shared_ffn)
  const autograd::Var* shared_expert_gate;  // (1, d_model), moe_shared_gate only
  // (experts) f32, moe_bias_update_rate > 0 only: added to the scores for the choice alone
  // (DeepSeek-V3's e_score_correction_bias), moved by the trainer, never by a gradient.
  const autograd::Var* selection_bias = nullptr;
};

// The router options of a config (scoring, top-k, renormalisation, scaling).
MoeRouterOptions moe_router_options(const ModelConfig& config);

// x: (tokens, d_model), already normalised -> (tokens, d_model). In training (context.router_losses
// set) the router's rows are recorded for the model's router losses.
autograd::Var moe_mlp(autograd::Tape& tape, const BlockContext& context, const MoeWeights& weights,
                      const autograd::Var& x);
// The routed half of moe_mlp: x: (tokens, d_model) through the experts `routed` chose, combined
// with routed.weights -> (tokens, d_model); no shared expert. For a family that routes from
// another input than the experts read (Gemma 4); reads weights.experts_gate_up / experts_down.
autograd::Var routed_experts(autograd::Tape& tape, const BlockContext& context, const MoeWeights& weights,
                             const autograd::Var& x, const autograd::RoutedTokens& routed);

}  // namespace lathe
