#include "lathe/models/gemma4_layer.h"

#include <cmath>

#include "lathe/autograd/gemma4_ops.h"
#include "lathe/autograd/mla_ops.h"
#include "lathe/device/device_tensor.h"
#include "lathe/models/layers.h"
#include "lathe/models/moe_layer.h"

namespace lathe {

using autograd::Tape;
using autograd::Var;

namespace {

bool shares_kv(const ModelConfig& config, int64_t layer) { return config.kv_source_layer(layer) != layer; }

int64_t mlp_width(const ModelConfig& config, int64_t layer) {
  return config.ffn_dim * (config.double_wide_mlp && shares_kv(config, layer) ? 2 : 1);
}

bool has_value_projection(const ModelConfig& config, int64_t layer) {
  return !(config.attention_k_eq_v && !config.layer_is_local(layer));
}

GatedActivation activation_of(const ModelConfig& config) {
  return config.ffn_activation == FfnActivation::silu ? GatedActivation::silu : GatedActivation::gelu_tanh;
}

// RMSNorm of every (batch, seq, heads, D) head without a weight (Gemma4RMSNorm with_scale=False).
Var unweighted_head_norm(Tape& tape, const BlockContext& context, const Var& x) {
  const ModelConfig& config = *context.config;
  return head_norm(tape, context, x,
                   autograd::make_var(autograd::filled_beside(x->value, {x->value.dim(3)}, tape.dtype(),
                                                              1.0 - config.norm_weight_offset)));
}

// x: (tokens, d_model), normalised -> the attention output (tokens, d_model).
Var gemma4_attention(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& x) {
  const ModelConfig& config = *context.config;
  const int64_t layer = context.layer, batch = context.batch, seq = context.seq;
  const int64_t head_dim = config.layer_head_dim(layer), kv_heads = config.layer_kv_heads(layer);
  const RopeParams rope = rope_params(config, layer, context.position_offset);
  auto heads = [&](const Var& rows, int64_t count) {
    return autograd::reshape(tape, rows, {batch, seq, count, head_dim});
  };
  Var q = heads(autograd::linear(tape, x, p[kQProj]), config.n_heads);
  if (p[kQNorm]) q = head_norm(tape, context, q, p[kQNorm]);
  q = autograd::rope(tape, q, rope);

  LayerKeyValues& shared = *context.layer_key_values;
  const int64_t source = config.kv_source_layer(layer);
  Var k, v;
  if (source == layer) {
    Var raw_k = heads(autograd::linear(tape, x, p[kKProj]), kv_heads);
    v = p[kVProj] ? heads(autograd::linear(tape, x, p[kVProj]), kv_heads) : raw_k;  // attention_k_eq_v
    k = p[kKNorm] ? head_norm(tape, context, raw_k, p[kKNorm]) : raw_k;
    k = autograd::rope(tape, k, rope);
    if (config.value_norm) v = unweighted_head_norm(tape, context, v);
    if (context.cache) {
      KvCache& cache = *context.cache;
      k = autograd::make_var(append_tokens(cache.keys[layer], context.position_offset, k->value));
      v = autograd::make_var(append_tokens(cache.values[layer], context.position_offset, v->value));
    }
    shared.keys[layer] = k;
    shared.values[layer] = v;
  } else {
    LATHE_ASSERT(source >= 0 && shared.keys[source]);
    k = shared.keys[source];
    v = shared.values[source];
  }
  FlashAttentionOptions options;
  options.causal = true;
  options.scale = config.attention_scale;
  options.softcap = config.attn_logit_softcap;
  options.window = config.layer_is_local(layer) ? config.sliding_window : 0;
  Var attended = autograd::attention(tape, q, k, v, options, context.attention_dtype);
  Var rows = autograd::reshape(tape, attended, {batch * seq, config.n_heads * head_dim});
  return autograd::linear(tape, rows, p[kOProj]);
}

// The MoE branch: residual (tokens, d_model), the stream before the feed-forward norms.
Var gemma4_moe(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& residual) {
  const ModelConfig& config = *context.config;
  Var router_input = autograd::rms_norm(tape, residual, p[kRouterScale], static_cast<float>(config.norm_eps),
                                        config.norm_weight_offset);
  router_input = autograd::scale(tape, router_input, static_cast<float>(1.0 / std::sqrt(config.d_model)));
  Var logits = autograd::linear(tape, router_input, p[kRouter]);
  autograd::RoutedTokens routed =
      autograd::moe_route(tape, logits, Tensor{}, moe_router_options(config), context.router_losses, context.layer);
  routed.weights = autograd::scale_by_expert(tape, routed.weights, p[kPerExpertScale], routed.expert_ids);
  const MoeWeights weights{&p[kRouter], &p[kExpertsGateUp], &p[kExpertsDown], nullptr, nullptr, nullptr, nullptr};
  return routed_experts(tape, context, weights, norm(tape, context, residual, p[kPreFeedforwardNorm2]), routed);
}

}  // namespace

std::vector<LayerParameterSpec> gemma4_layer_parameters(const ModelConfig& config, int64_t layer) {
  const int64_t d = config.d_model, head_dim = config.layer_head_dim(layer);
  const int64_t q_width = config.n_heads * head_dim, kv_width = config.layer_kv_heads(layer) * head_dim;
  const int64_t ffn = mlp_width(config, layer);
  std::vector<LayerParameterSpec> out = {{kQProj, "self_attn.q_proj.weight", ParameterKind::matrix, {q_width, d}}};
  if (config.qk_norm) out.push_back({kQNorm, "self_attn.q_norm.weight", ParameterKind::norm, {head_dim}});
  if (!shares_kv(config, layer)) {
    if (config.qk_norm) out.push_back({kKNorm, "self_attn.k_norm.weight", ParameterKind::norm, {head_dim}});
    out.push_back({kKProj, "self_attn.k_proj.weight", ParameterKind::matrix, {kv_width, d}});
    if (has_value_projection(config, layer))
      out.push_back({kVProj, "self_attn.v_proj.weight", ParameterKind::matrix, {kv_width, d}});
  }
  out.push_back({kOProj, "self_attn.o_proj.weight", ParameterKind::matrix, {d, q_width}});
  out.push_back({kGateProj, "mlp.gate_proj.weight", ParameterKind::matrix, {ffn, d}});
  out.push_back({kUpProj, "mlp.up_proj.weight", ParameterKind::matrix, {ffn, d}});
  out.push_back({kDownProj, "mlp.down_proj.weight", ParameterKind::matrix, {d, ffn}});
  out.push_back({kNorm0, "input_layernorm.weight", ParameterKind::norm, {d}});
  out.push_back({kNorm1, "post_attention_layernorm.weight", ParameterKind::norm, {d}});
  out.push_back({kNorm2, "pre_feedforward_layernorm.weight", ParameterKind::norm, {d}});
  out.push_back({kNorm3, "post_feedforward_layernorm.weight", ParameterKind::norm, {d}});
  out.push_back({kLayerScalar, "layer_scalar", ParameterKind::buffer, {1}, 1.0, 1.0f});
  if (const int64_t ple = config.per_layer_input_dim; ple > 0) {
    out.push_back({kPerLayerInputGate, "per_layer_input_gate.weight", ParameterKind::matrix, {ple, d}});
    out.push_back({kPerLayerProjection, "per_layer_projection.weight", ParameterKind::matrix, {d, ple}});
    out.push_back({kPostPerLayerInputNorm, "post_per_layer_input_norm.weight", ParameterKind::norm, {d}});
  }
  if (const int64_t experts = config.moe_experts; experts > 0) {
    const int64_t expert_ffn = config.resolved_moe_ffn_dim();
    const double active = static_cast<double>(config.moe_top_k) / static_cast<double>(experts);
    out.push_back({kRouter, "router.proj.weight", ParameterKind::router, {experts, d}});
    out.push_back({kRouterScale, "router.scale", ParameterKind::norm, {d}});
    out.push_back({kPerExpertScale, "router.per_expert_scale", ParameterKind::norm, {experts}});
    out.push_back(
        {kExpertsGateUp, "experts.gate_up_proj", ParameterKind::matrix, {experts, 2 * expert_ffn, d}, active});
    out.push_back({kExpertsDown, "experts.down_proj", ParameterKind::matrix, {experts, d, expert_ffn}, active});
    out.push_back({kPostFeedforwardNorm1, "post_feedforward_layernorm_1.weight", ParameterKind::norm, {d}});
    out.push_back({kPostFeedforwardNorm2, "post_feedforward_layernorm_2.weight", ParameterKind::norm, {d}});
    out.push_back({kPreFeedforwardNorm2, "pre_feedforward_layernorm_2.weight", ParameterKind::norm, {d}});
  }
  return out;
}

Var gemma4_block(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& input) {
  const ModelConfig& config = *context.config;
  Var attended = gemma4_attention(tape, context, p, norm(tape, context, input, p[kNorm0]));
  Var residual = autograd::add(tape, input, norm(tape, context, attended, p[kNorm1]));
  Var mlp =
      gated_mlp(tape, context, {&p[kGateProj], &p[kUpProj], &p[kDownProj]}, norm(tape, context, residual, p[kNorm2]));
  if (p[kRouter]) {
    Var dense = norm(tape, context, mlp, p[kPostFeedforwardNorm1]);
    Var routed = norm(tape, context, gemma4_moe(tape, context, p, residual), p[kPostFeedforwardNorm2]);
    mlp = autograd::add(tape, dense, routed);
  }
  Var h = autograd::add(tape, residual, norm(tape, context, mlp, p[kNorm3]));
  if (p[kPerLayerInputGate]) {
    LATHE_ASSERT(context.layer_inputs);
    const Var& layer_input = (*context.layer_inputs)[context.layer];  // (tokens, per_layer_input_dim)
    Var gate = autograd::linear(tape, h, p[kPerLayerInputGate]);
    Var gated = autograd::gated_activation(tape, gate, layer_input, activation_of(config));
    Var projected = autograd::linear(tape, gated, p[kPerLayerProjection]);
    h = autograd::add(tape, h, norm(tape, context, projected, p[kPostPerLayerInputNorm]));
  }
  // A buffer, never trained: read where it lives (on a GPU one 4-byte copy a layer).
  const double layer_scalar = scalar_value(p[kLayerScalar]->value);
  return layer_scalar == 1.0 ? h : autograd::scale(tape, h, static_cast<float>(layer_scalar));
}

LayerActivationCounts gemma4_activation_counts(const ModelConfig& config, int64_t layer) {
  const int64_t d = config.d_model, head_dim = config.layer_head_dim(layer), heads = config.n_heads;
  const int64_t q = heads * head_dim, kv_heads = shares_kv(config, layer) ? 0 : config.layer_kv_heads(layer);
  const int64_t k = kv_heads * head_dim, ffn = mlp_width(config, layer);
  int64_t elements = 4 * (d + 1);              // the four sandwich norms (outputs + inv_rms)
  elements += 2 * (q + heads) + q;             // q projection, its norm (+ inv_rms), RoPE
  elements += 2 * (k + kv_heads) + k + 2 * k;  // k/v projections, k norm, RoPE, value norm
  elements += q + heads + d + 2 * d;           // attention output + log-sum-exp, o_proj, two residual adds
  elements += 3 * ffn + d;                     // gate, up, activation, down
  int64_t matmuls = q + 2 * k + d + 2 * ffn + d;
  if (config.moe_experts > 0) {
    const LayerActivationCounts moe = feed_forward_counts(config, layer);  // the routed branch
    elements += moe.save_all + 3 * (d + 1) + 2 * d + config.moe_top_k +
                d;  // + the three norms, router input, scaled weights, sum
    matmuls += moe.matmul_outputs;
  }
  if (config.per_layer_input_dim > 0) {
    const int64_t ple = config.per_layer_input_dim;
    elements += 2 * ple + d + (d + 1) + d;  // gate, GeGLU, projection, its norm, the add
    matmuls += ple + d;
  }
  return {elements, matmuls};
}

double gemma4_attention_training_flops_per_token(const ModelConfig& config, int64_t seq_len) {
  double total = 0;
  for (int64_t layer = 0; layer < config.n_layers; ++layer)
    total += 6.0 * static_cast<double>(config.n_heads * config.layer_head_dim(layer) * seq_len);
  return config.n_layers > 0 ? total / static_cast<double>(config.n_layers) : 0.0;
}

KvCache make_gemma4_kv_cache(const ModelConfig& config, int64_t max_seq) {
  std::vector<std::pair<int64_t, int64_t>> layers;
  for (int64_t layer = 0; layer < config.n_layers; ++layer)
    layers.emplace_back(shares_kv(config, layer) ? 0 : config.layer_kv_heads(layer), config.layer_head_dim(layer));
  return KvCache::per_layer(layers, max_seq);
}

namespace {

std::vector<LayerParameterSpec> per_layer_input_parameters(const ModelConfig& config) {
  const int64_t ple = config.per_layer_input_dim;
  if (ple == 0) return {};
  const int64_t width = config.n_layers * ple;
  const int64_t rows = config.per_layer_input_vocab > 0 ? config.per_layer_input_vocab : config.vocab_size;
  return {
      {kPerLayerEmbedding, "embed_tokens_per_layer.weight", ParameterKind::embedding, {rows, width}},
      {kPerLayerModelProjection, "per_layer_model_projection.weight", ParameterKind::matrix, {width, config.d_model}},
      {kPerLayerProjectionNorm, "per_layer_projection_norm.weight", ParameterKind::norm, {ple}},
  };
}

std::vector<Var> per_layer_inputs(Tape& tape, const ModelConfig& config, const LayerParameters& p, const Tensor& ids,
                                  const Var& embedded) {
  const int64_t ple = config.per_layer_input_dim;
  if (ple == 0) return {};
  const int64_t tokens = ids.numel(), layers = config.n_layers;
  Var identity = autograd::embedding(tape, p[kPerLayerEmbedding], ids, std::sqrt(static_cast<float>(ple)));
  Var context = autograd::linear(tape, embedded, p[kPerLayerModelProjection]);
  context = autograd::scale(tape, context, static_cast<float>(1.0 / std::sqrt(config.d_model)));
  context = autograd::reshape(tape, context, {tokens * layers, ple});
  context = autograd::rms_norm(tape, context, p[kPerLayerProjectionNorm], static_cast<float>(config.norm_eps),
                               config.norm_weight_offset);
  context = autograd::reshape(tape, context, {tokens, layers * ple});
  Var combined = autograd::scale(tape, autograd::add(tape, context, identity), static_cast<float>(std::sqrt(0.5)));
  const std::vector<int64_t> widths(static_cast<size_t>(layers), ple);
  return autograd::split_last_dim(tape, combined, widths);
}

}  // namespace

const ModelInputsSpec kGemma4PerLayerInputs = {
    .parameters = per_layer_input_parameters,
    .slot_count = kGemma4InputSlots,
    .layer_inputs = per_layer_inputs,
};

}  // namespace lathe
