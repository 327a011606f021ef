#include "lathe/models/blocks.h"

#include "lathe/models/layers.h"
#include "lathe/models/moe_layer.h"

namespace lathe {

using autograd::Tape;
using autograd::Var;

void add_feed_forward_parameters(const ModelConfig& config, int64_t layer, const char* shared_expert_prefix,
                                 std::vector<LayerParameterSpec>& out) {
  const int64_t d = config.d_model;
  if (!config.layer_is_moe(layer)) {
    out.push_back({kGateProj, "mlp.gate_proj.weight", ParameterKind::matrix, {config.ffn_dim, d}});
    out.push_back({kUpProj, "mlp.up_proj.weight", ParameterKind::matrix, {config.ffn_dim, d}});
    out.push_back({kDownProj, "mlp.down_proj.weight", ParameterKind::matrix, {d, config.ffn_dim}});
    return;
  }
  const int64_t experts = config.moe_experts, ffn = config.resolved_moe_ffn_dim();
  const double active = static_cast<double>(config.moe_top_k) / static_cast<double>(experts);
  out.push_back({kRouter, "mlp.gate.weight", ParameterKind::router, {experts, d}});
  if (config.moe_bias_update_rate > 0)
    out.push_back({kSelectionBias, "mlp.gate.e_score_correction_bias", ParameterKind::buffer, {experts}});
  out.push_back({kExpertsGateUp, "mlp.experts.gate_up_proj", ParameterKind::matrix, {experts, 2 * ffn, d}, active});
  out.push_back({kExpertsDown, "mlp.experts.down_proj", ParameterKind::matrix, {experts, d, ffn}, active});
  if (config.moe_shared_ffn_dim > 0) {
    const int64_t shared = config.moe_shared_ffn_dim;
    const std::string prefix = std::string(shared_expert_prefix) + ".";
    out.push_back({kSharedGateProj, prefix + "gate_proj.weight", ParameterKind::matrix, {shared, d}});
    out.push_back({kSharedUpProj, prefix + "up_proj.weight", ParameterKind::matrix, {shared, d}});
    out.push_back({kSharedDownProj, prefix + "down_proj.weight", ParameterKind::matrix, {d, shared}});
    if (config.moe_shared_gate)
      out.push_back({kSharedExpertGate, "mlp.shared_expert_gate.weight", ParameterKind::matrix, {1, d}});
  }
}

std::vector<LayerParameterSpec> decoder_layer_parameters(const ModelConfig& config, int64_t layer,
                                                         std::span<const char* const> norm_names) {
  LATHE_ASSERT(norm_names.size() == 2 || norm_names.size() == 4);
  const int64_t d = config.d_model, head_dim = config.resolved_head_dim();
  const int64_t q_width = config.n_heads * head_dim, kv_width = config.n_kv_heads * head_dim;
  auto norm_name = [&](size_t i) { return std::string(norm_names[i]) + ".weight"; };
  std::vector<LayerParameterSpec> parameters = {
      {kNorm0, norm_name(0), ParameterKind::norm, {d}},
      {kQProj, "self_attn.q_proj.weight", ParameterKind::matrix, {q_width, d}},
      {kKProj, "self_attn.k_proj.weight", ParameterKind::matrix, {kv_width, d}},
      {kVProj, "self_attn.v_proj.weight", ParameterKind::matrix, {kv_width, d}},
  };
  if (config.attention_bias) {
    parameters.push_back({kQBias, "self_attn.q_proj.bias", ParameterKind::bias, {q_width}});
    parameters.push_back({kKBias, "self_attn.k_proj.bias", ParameterKind::bias, {kv_width}});
    parameters.push_back({kVBias, "self_attn.v_proj.bias", ParameterKind::bias, {kv_width}});
  }
  parameters.push_back({kOProj, "self_attn.o_proj.weight", ParameterKind::matrix, {d, q_width}});
  if (config.qk_norm) {
    const bool full = config.qk_norm_full_width;
    parameters.push_back({kQNorm, "self_attn.q_norm.weight", ParameterKind::norm, {full ? q_width : head_dim}});
    parameters.push_back({kKNorm, "self_attn.k_norm.weight", ParameterKind::norm, {full ? kv_width : head_dim}});
  }
  for (size_t i = 1; i < norm_names.size(); ++i)
    parameters.push_back({static_cast<int>(kNorm0 + i), norm_name(i), ParameterKind::norm, {d}});
  add_feed_forward_parameters(config, layer, "mlp.shared_expert", parameters);
  return parameters;
}

std::vector<LayerParameterSpec> pre_norm_layer_parameters(const ModelConfig& config, int64_t layer) {
  static constexpr const char* kNorms[] = {"input_layernorm", "post_attention_layernorm"};
  return decoder_layer_parameters(config, layer, kNorms);
}

std::vector<LayerParameterSpec> sandwich_layer_parameters(const ModelConfig& config, int64_t layer) {
  static constexpr const char* kNorms[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                                           "post_feedforward_layernorm"};
  return decoder_layer_parameters(config, layer, kNorms);
}

namespace {

AttentionWeights attention_weights(const LayerParameters& p) {
  return {&p[kQProj], &p[kKProj], &p[kVProj], &p[kOProj], &p[kQBias], &p[kKBias], &p[kVBias], &p[kQNorm], &p[kKNorm]};
}

}  // namespace

Var feed_forward(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& x) {
  if (!p[kRouter]) return gated_mlp(tape, context, {&p[kGateProj], &p[kUpProj], &p[kDownProj]}, x);
  const MoeWeights weights{&p[kRouter],       &p[kExpertsGateUp],  &p[kExpertsDown],      &p[kSharedGateProj],
                           &p[kSharedUpProj], &p[kSharedDownProj], &p[kSharedExpertGate], &p[kSelectionBias]};
  return moe_mlp(tape, context, weights, x);
}

// The dtype the norms before attention and before the feed-forward write: bf16 where all their
// readers are bf16 products (bf16 training: self_attention's x is read by the q/k/v projections
// alone, a dense MLP's by gate and up; the MoE block's router and permutation read it too).
static DType attention_input_dtype(const LayerParameters& p) {
  return products_input_dtype({&p[kQProj], &p[kKProj], &p[kVProj]});
}
static DType feed_forward_input_dtype(const LayerParameters& p) {
  return p[kRouter] ? DType::f32 : products_input_dtype({&p[kGateProj], &p[kUpProj]});
}

Var pre_norm_block(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& h) {
  Var attended =
      self_attention(tape, context, attention_weights(p), norm(tape, context, h, p[kNorm0], attention_input_dtype(p)));
  Var after_attention = autograd::add(tape, h, attended);
  Var mlp_out =
      feed_forward(tape, context, p, norm(tape, context, after_attention, p[kNorm1], feed_forward_input_dtype(p)));
  return autograd::add(tape, after_attention, mlp_out);
}

Var sandwich_block(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& h) {
  Var attended =
      self_attention(tape, context, attention_weights(p), norm(tape, context, h, p[kNorm0], attention_input_dtype(p)));
  Var after_attention = autograd::add(tape, h, norm(tape, context, attended, p[kNorm1]));
  Var mlp_out =
      feed_forward(tape, context, p, norm(tape, context, after_attention, p[kNorm2], feed_forward_input_dtype(p)));
  return autograd::add(tape, after_attention, norm(tape, context, mlp_out, p[kNorm3]));
}

std::string multimodal_text_weight_name(const std::string& hf_name, std::span<const char* const> skipped) {
  auto starts_with = [&](const std::string& prefix) { return hf_name.compare(0, prefix.size(), prefix) == 0; };
  for (const char* prefix : {"model.language_model.", "language_model.model."})
    if (starts_with(prefix)) return "model." + hf_name.substr(std::string(prefix).size());
  if (hf_name == "language_model.lm_head.weight" || hf_name == "lm_head.weight") return "lm_head.weight";
  for (const char* part : skipped)
    if (starts_with(part)) return "";
  return hf_name;
}

LayerActivationCounts feed_forward_counts(const ModelConfig& config, int64_t layer) {
  const int64_t d = config.d_model;
  if (!config.layer_is_moe(layer)) return {3 * config.ffn_dim + d, 2 * config.ffn_dim + d};  // gate, up, act, down
  const int64_t experts = config.moe_experts, top_k = config.moe_top_k, ffn = config.resolved_moe_ffn_dim();
  // Router logits and probs; weights, ids, destination per slot; per routed copy the permuted row,
  // gate_up, the activation and the expert output; the combined output.
  LayerActivationCounts counts{2 * experts + 3 * top_k + top_k * (d + 3 * ffn + d) + d,
                               experts + top_k * (2 * ffn + d)};
  if (config.moe_shared_ffn_dim > 0) {
    const int64_t shared = config.moe_shared_ffn_dim, gate = config.moe_shared_gate ? 1 : 0;
    // the shared MLP (gate_up, the activation, down), its gate logit, the sum (the gating is fused into it)
    counts.save_all += 3 * shared + d + gate + d;
    counts.matmul_outputs += 2 * shared + d + (config.moe_shared_gate ? 1 : 0);
  }
  return counts;
}

LayerActivationCounts decoder_activation_counts(const ModelConfig& config, int64_t layer) {
  const int64_t head_dim = config.resolved_head_dim();
  const int64_t d = config.d_model, q = config.n_heads * head_dim, k = config.n_kv_heads * head_dim;
  const int64_t heads = config.n_heads, kv_heads = config.n_kv_heads;
  const LayerActivationCounts ffn = feed_forward_counts(config, layer);
  int64_t elements = 2 * d + 2;  // two norm outputs + their inv_rms
  elements += q + 2 * k;         // q, k, v projections
  elements += q + k;             // RoPE outputs
  elements += q + heads;         // attention output + log-sum-exp
  elements += d + 2 * d;         // o_proj, two residual adds
  elements += ffn.save_all;      // the feed-forward (dense: gate, up, activation, down)
  if (config.qk_norm) elements += q + k + (config.qk_norm_full_width ? 2 : heads + kv_heads);
  // Attention biases add nothing: they are added in the projections' matmul epilogue.
  if (config.sandwich_norms) elements += 2 * d + 2;  // post-attention and post-MLP norms
  return {elements, q + 2 * k + d + ffn.matmul_outputs};
}

double causal_attention_training_flops_per_token(const ModelConfig& config, int64_t seq_len) {
  return 6.0 * static_cast<double>(config.n_heads * config.resolved_head_dim() * seq_len);
}

KvCache make_decoder_kv_cache(const ModelConfig& config, int64_t max_seq) {
  return KvCache(config.n_layers, max_seq, config.n_kv_heads, config.resolved_head_dim());
}

}  // namespace lathe
