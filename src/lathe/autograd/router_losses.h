// The router losses of a mixture-of-experts model over one forward pass: the load-balancing
// auxiliary loss and the router z-loss (ops/moe_losses.h), computed over every MoE layer's router
// rows stacked, as transformers' load_balancing_loss_func does (the loss of the stacked rows is
// not the sum of per-layer losses: its per-expert token counts are summed over the layers).
//
// Because one layer's gradient depends on every layer's routing, the losses cannot be recorded as
// ordinary tape nodes: each router (autograd::moe_route) records its rows here during the forward,
// finish() computes the losses and their gradients once the forward is over, and each router's
// backward adds its own slice of those gradients to its probabilities' and logits' gradients. A
// rematerialised layer records the same rows again (recording is by layer, so it is idempotent).
//
// The objective a model trains on is cross-entropy + aux_coef * aux_loss + z_coef * z_loss; the
// gradients here are scaled by grad_scale (the micro-batch weight), like the cross-entropy's.
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/autograd/tape.h"

namespace lathe::autograd {

class RouterLosses {
 public:
  // moe_layers: the model layers that route (ascending); tokens routed per layer; the router's
  // width and top-k. Buffers are f32 (fast) or f64 (reference precision).
  RouterLosses(Precision precision, std::vector<int64_t> moe_layers, int64_t tokens, int64_t experts, int64_t top_k,
               double aux_coef, double z_coef, float grad_scale);

  // Copies layer `layer`'s logits and probs (tokens, experts) and expert_ids (tokens, top_k) i32.
  void record(int64_t layer, const Tensor& logits, const Tensor& probs, const Tensor& expert_ids);
  // Computes both losses and, for the coefficients that are not 0, their gradients. Every MoE layer
  // must have recorded.
  void finish();

  bool finished() const { return finished_; }
  double aux_loss() const { return aux_loss_; }  // the load-balancing loss (not multiplied by aux_coef)
  double z_loss() const { return z_loss_; }      // the mean squared log-sum-exp of the logits
  const std::vector<int64_t>& moe_layers() const { return moe_layers_; }
  // Tokens routed to each expert (counting every top-k slot) by the i-th MoE layer: (experts).
  std::vector<int64_t> expert_counts(size_t i) const;

  // For the router backward of `layer`: the extra gradients of its probs and logits (tokens,
  // experts), or views with null data when that loss has a zero coefficient.
  TensorView d_probs(int64_t layer) const;
  TensorView d_logits(int64_t layer) const;

 private:
  int64_t slot(int64_t layer) const;

  Precision precision_;
  std::vector<int64_t> moe_layers_;
  int64_t tokens_, experts_, top_k_;
  double aux_coef_, z_coef_;
  float grad_scale_;
  Tensor logits_, probs_, expert_ids_;  // (moe layers * tokens, experts), ids (moe layers * tokens, top_k)
  Tensor d_probs_, d_logits_;           // the same shape as probs; undefined when the coefficient is 0
  std::vector<bool> recorded_;
  bool finished_ = false;
  double aux_loss_ = 0, z_loss_ = 0;
};

}  // namespace lathe::autograd
