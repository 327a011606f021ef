#include "lathe/models/moe_layer.h"

#include "lathe/autograd/shared_expert_ops.h"
#include "lathe/models/layers.h"

namespace lathe {

using autograd::Tape;
using autograd::Var;

MoeRouterOptions moe_router_options(const ModelConfig& config) {
  MoeRouterOptions options;
  options.scoring = parse_router_scoring(config.moe_router_scoring);
  options.top_k = config.moe_top_k;
  options.renormalize = config.moe_renormalize;
  options.scaling = static_cast<float>(config.moe_routed_scaling);
  options.n_groups = config.moe_groups;
  options.topk_group = config.moe_topk_groups;
  options.group_score_experts = config.moe_group_score_experts;
  return options;
}

namespace {

GatedActivation expert_activation(const ModelConfig& config) {
  return config.ffn_activation == FfnActivation::silu ? GatedActivation::silu : GatedActivation::gelu_tanh;
}

// The shared expert: gate and up projections stacked into one GEMM of 2 * shared_ffn columns
// (one pass over x, one dx product), the activation reading both halves in place, then down.
// x: (tokens, d_model) -> (tokens, d_model).
Var shared_expert(Tape& tape, const ModelConfig& config, const MoeWeights& weights, const Var& x) {
  const Var gate_and_up[] = {*weights.shared_gate_proj, *weights.shared_up_proj};
  const Var stacked = autograd::stack_rows(tape, gate_and_up);
  Var gate_up = autograd::linear(tape, x, stacked);  // (tokens, 2 * shared_ffn)
  Var hidden = autograd::gated_activation_fused(tape, gate_up, expert_activation(config),
                                                products_input_dtype({&stacked, weights.shared_down_proj}));
  return autograd::linear(tape, hidden, *weights.shared_down_proj);
}

}  // namespace

Var routed_experts(Tape& tape, const BlockContext& context, const MoeWeights& weights, const Var& x,
                   const autograd::RoutedTokens& routed) {
  const ModelConfig& config = *context.config;
  // bf16 rows where the grouped gate_up product reads them alone (expert parallelism sends f32 rows).
  const DType rows_dtype = context.expert_shard ? DType::f32 : products_input_dtype({weights.experts_gate_up});
  autograd::PermutedTokens permuted = autograd::moe_permute(tape, x, routed.expert_ids, config.moe_experts, rows_dtype);
  Var rows = permuted.rows;
  Tensor offsets = permuted.group_offsets;
  autograd::DispatchedTokens dispatched;
  if (context.expert_shard) {  // expert parallelism: the rows go to the ranks that hold their experts
    dispatched = autograd::expert_dispatch(tape, *context.expert_shard, rows, offsets);
    rows = dispatched.rows;
    offsets = dispatched.group_offsets;
  }
  Var gate_up = autograd::grouped_linear(tape, rows, *weights.experts_gate_up, offsets);
  Var hidden = autograd::gated_activation_fused(tape, gate_up, expert_activation(config),
                                                products_input_dtype({weights.experts_gate_up, weights.experts_down}));
  Var expert_out = autograd::grouped_linear(tape, hidden, *weights.experts_down, offsets);
  if (context.expert_shard)
    expert_out = autograd::expert_return(tape, *context.expert_shard, expert_out, dispatched.plan);
  return autograd::moe_combine(tape, expert_out, routed.weights, permuted.destination);
}

Var moe_mlp(Tape& tape, const BlockContext& context, const MoeWeights& weights, const Var& x) {
  Var logits = autograd::linear(tape, x, *weights.router);
  const Tensor selection_bias =
      weights.selection_bias && *weights.selection_bias ? (*weights.selection_bias)->value : Tensor{};
  autograd::RoutedTokens routed = autograd::moe_route(tape, logits, selection_bias, moe_router_options(*context.config),
                                                      context.router_losses, context.layer);
  Var y = routed_experts(tape, context, weights, x, routed);
  if (!weights.shared_gate_proj || !*weights.shared_gate_proj) return y;
  Var shared = shared_expert(tape, *context.config, weights, x);
  if (weights.shared_expert_gate && *weights.shared_expert_gate)
    return autograd::add_sigmoid_gated(tape, y, shared, autograd::linear(tape, x, *weights.shared_expert_gate));
  return autograd::add(tape, y, shared);
}

}  // namespace lathe
