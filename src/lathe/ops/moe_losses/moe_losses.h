// The router losses and the balancing update of a mixture of experts, as five ops:
//
// moe_load_balancing_loss: the Switch-style auxiliary loss, exactly transformers'
// load_balancing_loss_func (Mixtral, Qwen2/3-MoE, OLMoE), without attention mask:
//   count_e = #{(t, k) : expert_ids[t, k] == e}          (tokens routed to e, over all top-k slots)
//   P_e     = (1 / tokens) * sum_t probs[t, e]           (mean router probability of e)
//   loss    = experts * sum_e (count_e / tokens) * P_e
// transformers concatenates every layer's router logits before computing it, so to match it the
// caller passes all layers' rows stacked as one (n_layers * tokens, experts) input: the loss of
// stacked rows is not the sum of per-layer losses. Uniform routing gives loss = top_k.
// moe_load_balancing_loss_backward (expert_ids held fixed, as the top-k is not differentiable):
//   d_probs[t, e] (+)= d_loss * experts * count_e / tokens^2           (the same for every t)
//
// moe_z_loss: the router z-loss of ST-MoE, lse_t = log sum_e exp(logits[t, e]):
//   loss = (1 / tokens) * sum_t lse_t^2
// moe_z_loss_backward:
//   d_logits[t, e] (+)= d_loss * 2 * lse_t * softmax(logits[t])_e / tokens
//
// moe_bias_update: aux-loss-free balancing (DeepSeek-V3), once per optimizer step, not
// differentiated. With mean_count = tokens * top_k / experts (compared exactly, in integers:
// sign(tokens * top_k - experts * count_e)) and sign(0) = 0:
//   counts[e] = count_e,   bias[e] += rate * sign(mean_count - count_e)
//
// Shapes and dtypes: probs, logits, d_probs, d_logits (tokens, experts) f32; expert_ids
// (tokens, top_k) i32 in [0, experts); loss (1) f32; bias (experts) f32; counts (experts) i64.
// All contiguous. With tokens = 0 the losses are 0 (no division by zero) and nothing is counted.
// The top_k ids of one token need not be distinct: each (t, k) counts once.
//
// Errors (lathe::Error, naming the op and argument): shapes, dtypes, strides, experts or top_k of
// 0, an id outside [0, experts) ("expert_ids[3, 1] = 9 is out of range [0, 8)"), a non-finite
// d_loss, a negative or non-finite rate.
//
// Determinism: the two losses reduce fixed chunks of tokens_per_chunk tokens (a config field, not
// the thread count) and add the chunk partials in chunk order in double, so they are bitwise
// reproducible for any thread count at a given config (the heuristic ignores the thread count).
// Counts are integers (exact in any order); the backwards and the bias update write each element
// from its own row or expert only.
// On the GPU: moe_losses_cuda.h ("cuda_emulated" runs its kernels on the host).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct MoeLoadBalancingLossArgs {
  TensorView probs;       // (tokens, experts) f32: the router's probabilities (softmax over all experts)
  TensorView expert_ids;  // (tokens, top_k) i32
  TensorView loss;        // (1) f32 output
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(probs), visit(expert_ids), visit(loss);
  }
};

struct MoeLoadBalancingLossBackwardArgs {
  TensorView expert_ids;    // (tokens, top_k) i32
  float d_loss = 1.0f;      // gradient of the loss (the coefficient times the upstream gradient)
  TensorView d_probs;       // (tokens, experts) f32 output: d_loss * experts * count_e / tokens^2
  bool accumulate = false;  // d_probs += (the router backward's extra d_probs input sums several terms)
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(expert_ids), visit(d_probs);
  }
};

struct MoeZLossArgs {
  TensorView logits;  // (tokens, experts) f32
  TensorView loss;    // (1) f32 output
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(logits), visit(loss);
  }
};

struct MoeZLossBackwardArgs {
  TensorView logits;        // (tokens, experts) f32
  float d_loss = 1.0f;      // gradient of the loss (the coefficient times the upstream gradient)
  TensorView d_logits;      // (tokens, experts) f32 output: d_loss * 2 * lse_t * softmax(logits[t]) / tokens
  bool accumulate = false;  // d_logits +=
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(logits), visit(d_logits);
  }
};

struct MoeBiasUpdateArgs {
  TensorView expert_ids;  // (tokens, top_k) i32
  TensorView bias;        // (experts) f32, updated in place
  TensorView counts;      // (experts) i64 output: count_e (for the trainer's min / max / mean load)
  float rate = 1e-3f;     // the bias update speed (DeepSeek-V3's gamma)
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(expert_ids), visit(bias), visit(counts);
  }
};

// One config for all five: the token chunk is the unit of parallel work and, for the losses, of
// the fixed-order reduction. A parallel task also gets at least ~16K-64K elements or ids (so a
// small call runs on the calling thread); that changes which thread runs a chunk, never the bits.
struct MoeLossesCpuConfig {
  int64_t tokens_per_chunk = 256;
  template <class Visit>
  void visit(Visit&& field) {
    field("tokens_per_chunk", tokens_per_chunk);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void moe_load_balancing_loss(const MoeLoadBalancingLossArgs& args, const Dispatch& dispatch = {});
void moe_load_balancing_loss_backward(const MoeLoadBalancingLossBackwardArgs& args, const Dispatch& dispatch = {});
void moe_z_loss(const MoeZLossArgs& args, const Dispatch& dispatch = {});
void moe_z_loss_backward(const MoeZLossBackwardArgs& args, const Dispatch& dispatch = {});
void moe_bias_update(const MoeBiasUpdateArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape, dtype or value.
void validate(const MoeLoadBalancingLossArgs& args);
void validate(const MoeLoadBalancingLossBackwardArgs& args);
void validate(const MoeZLossArgs& args);
void validate(const MoeZLossBackwardArgs& args);
void validate(const MoeBiasUpdateArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline), any float dtypes
// for the float tensors. With accumulate, the backwards add to what their output holds; the bias
// update reads and writes args.bias.
template <class T>
void moe_load_balancing_loss_reference(const MoeLoadBalancingLossArgs& args);
template <class T>
void moe_load_balancing_loss_backward_reference(const MoeLoadBalancingLossBackwardArgs& args);
template <class T>
void moe_z_loss_reference(const MoeZLossArgs& args);
template <class T>
void moe_z_loss_backward_reference(const MoeZLossBackwardArgs& args);
template <class T>
void moe_bias_update_reference(const MoeBiasUpdateArgs& args);

OpCost moe_load_balancing_loss_cost(const MoeLoadBalancingLossArgs& args);
OpCost moe_load_balancing_loss_backward_cost(const MoeLoadBalancingLossBackwardArgs& args);
OpCost moe_z_loss_cost(const MoeZLossArgs& args);
OpCost moe_z_loss_backward_cost(const MoeZLossBackwardArgs& args);
OpCost moe_bias_update_cost(const MoeBiasUpdateArgs& args);

const Op<MoeLoadBalancingLossArgs, MoeLossesCpuConfig>& moe_load_balancing_loss_op();
const Op<MoeLoadBalancingLossBackwardArgs, MoeLossesCpuConfig>& moe_load_balancing_loss_backward_op();
const Op<MoeZLossArgs, MoeLossesCpuConfig>& moe_z_loss_op();
const Op<MoeZLossBackwardArgs, MoeLossesCpuConfig>& moe_z_loss_backward_op();
const Op<MoeBiasUpdateArgs, MoeLossesCpuConfig>& moe_bias_update_op();

}  // namespace lathe
