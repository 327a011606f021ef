// The mixture-of-experts router: the router's logits to probabilities, a top-k choice of experts
// per token, and the combine weights of the chosen experts.
//   p[t, e]     = softmax_e(logits[t, :])  or  sigmoid(logits[t, e])          (probs, saved for backward)
//   s[t, e]     = p[t, e] + selection_bias[e]   (bias only if given)          (selection score)
//   expert_ids  = the top_k experts by s, best first; equal s: the lower expert id first.
//     Group-limited (n_groups > 1, DeepSeek-V3): the experts form n_groups contiguous groups of
//     experts / n_groups; a group's score is the sum of its best group_score_experts values of s;
//     only the best topk_group groups (equal scores: the lower group id) are selectable.
//   weights[t,j]= scaling * p[t, ids[t,j]] / (renormalize ? sum_j' p[t, ids[t,j']] : 1)
// The bias moves the choice only (aux-loss-free balancing); weights use the unbiased p.
// Models: Mixtral (softmax, top-2, renormalize), Qwen3-MoE (softmax, top-8, renormalize =
// norm_topk_prob), OLMoE (softmax, top-8), GPT-OSS (softmax + renormalize = softmax over the top-k
// logits), DeepSeek-V3 (sigmoid, bias, 8 groups keep 4 by top-2 sums, top-8, renormalize, 2.5).
// Backward: the choice is piecewise constant (no gradient flows through it or the bias), so
//   d_p         = d_probs + d(weights)/dp^T d_weights   (through the renormalisation and scaling)
//   d_logits    = J^T d_p,  J the softmax Jacobian (p * (d_p - <p, d_p>)) or sigmoid's (d_p * p * (1 - p)).
// With renormalize, S = sum_j p_j over the chosen: d_p[ids[j]] += scaling / S * (d_w[j] - sum_j' d_w[j'] p_j' / S).
// Dtypes: logits, selection_bias, probs, weights, d_* f32; expert_ids i32. Logits must be finite:
// a NaN row gets unspecified (but written, in-range) expert ids.
// Errors (lathe::Error, one naming the argument): shapes, dtypes, non-contiguous tensors,
// top_k not in [1, experts], n_groups not dividing experts, topk_group not in [1, n_groups],
// top_k > topk_group * experts / n_groups, group_score_experts not in [1, experts / n_groups],
// scaling not finite and > 0, backward expert ids outside [0, experts).
// Each token row is computed by one thread in a fixed order: bitwise reproducible for any thread count.
// On the GPU: moe_router_cuda.h (one thread per token; "cuda_emulated" runs its kernels on the host).
#pragma once

#include <string>

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

enum class RouterScoring { softmax, sigmoid };
const char* router_scoring_name(RouterScoring scoring);
RouterScoring parse_router_scoring(const std::string& name);  // lathe::Error naming the accepted values

struct MoeRouterOptions {
  RouterScoring scoring = RouterScoring::softmax;
  int64_t top_k = 2;
  // weights = p_sel / sum(p_sel) over the k selected (Mixtral, Qwen3 norm_topk_prob, DeepSeek-V3)
  bool renormalize = false;
  // group-limited top-k (DeepSeek-V3): experts split into n_groups contiguous equal groups
  int64_t n_groups = 1;
  // keep the best topk_group groups, then pick top_k experts among them (n_groups == 1: off)
  int64_t topk_group = 1;
  // a group's score = sum of its best group_score_experts selection scores (V3: 2; V2: 1 = max)
  int64_t group_score_experts = 2;
  // routed_scaling_factor, multiplies the weights after renormalisation
  float scaling = 1.0f;
};

struct MoeRouterArgs {
  TensorView logits;          // (tokens, experts) f32: the router's linear output
  TensorView selection_bias;  // (experts) f32, optional (data == nullptr): added to the scores for SELECTION only
                              // (aux-loss-free balancing); the weights use the unbiased probabilities
  TensorView probs;           // (tokens, experts) f32 output: softmax over experts, or elementwise sigmoid, of logits
  TensorView expert_ids;      // (tokens, top_k) i32 output: chosen experts, best first
  TensorView weights;         // (tokens, top_k) f32 output: combine weights, in expert_ids order
  MoeRouterOptions options;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(logits), visit(selection_bias), visit(probs), visit(expert_ids), visit(weights);
  }
};

struct MoeRouterBackwardArgs {
  TensorView probs;       // (tokens, experts) f32, from the forward
  TensorView expert_ids;  // (tokens, top_k) i32, from the forward
  TensorView d_weights;   // (tokens, top_k) f32: gradient of weights
  TensorView d_probs;     // (tokens, experts) f32, optional: extra gradient w.r.t. probs (aux losses add theirs)
  TensorView d_logits;    // (tokens, experts) f32 output (overwritten)
  MoeRouterOptions options;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(probs), visit(expert_ids), visit(d_weights), visit(d_probs), visit(d_logits);
  }
};

struct MoeRouterCpuConfig {
  int64_t rows_per_task = 16;  // token rows per parallel chunk
  int64_t filter = 1;          // top-k: 1 = offer only the elements reaching a stripe-max bound; 0 = scan all
  int64_t skip_vectors = 2;    // the scan: vectors whose max is tested against the k-th best at once
  template <class Visit>
  void visit(Visit&& field) {
    field("rows_per_task", rows_per_task);
    field("filter", filter);
    field("skip_vectors", skip_vectors);
  }
};

struct MoeRouterBackwardCpuConfig {
  int64_t rows_per_task = 16;  // token rows per parallel chunk
  template <class Visit>
  void visit(Visit&& field) {
    field("rows_per_task", rows_per_task);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void moe_router(const MoeRouterArgs& args, const Dispatch& dispatch = {});
void moe_router_backward(const MoeRouterBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual value, shape or dtype.
void validate(const MoeRouterArgs& args);
void validate(const MoeRouterBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline), any output dtypes.
template <class T>
void moe_router_reference(const MoeRouterArgs& args);
template <class T>
void moe_router_backward_reference(const MoeRouterBackwardArgs& args);

OpCost moe_router_cost(const MoeRouterArgs& args);
OpCost moe_router_backward_cost(const MoeRouterBackwardArgs& args);

const Op<MoeRouterArgs, MoeRouterCpuConfig>& moe_router_op();
const Op<MoeRouterBackwardArgs, MoeRouterBackwardCpuConfig>& moe_router_backward_op();

}  // namespace lathe
