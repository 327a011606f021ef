#include "lathe/models/layers.h"

#include <cmath>

#include "lathe/autograd/gpt_oss_ops.h"

namespace lathe {

using autograd::Tape;
using autograd::Var;

Var norm(Tape& tape, const BlockContext& context, const Var& x, const Var& weight, DType output) {
  return autograd::rms_norm(tape, x, weight, static_cast<float>(context.config->norm_eps),
                            context.config->norm_weight_offset, output);
}

DType products_input_dtype(std::initializer_list<const Var*> weights) {
  for (const Var* weight : weights)
    if (!weight || !*weight || !(*weight)->value_bf16.defined()) return DType::f32;
  return DType::bf16;
}

RopeParams rope_params(const ModelConfig& config, int64_t layer, int64_t position_offset) {
  RopeParams params;
  params.interleaved = config.rope_interleave;
  params.position_offset = position_offset;
  const bool local = config.layer_is_local(layer);
  params.theta = local && config.rope_local_theta > 0 ? config.rope_local_theta : config.rope_theta;
  const int64_t head_dim = config.layer_head_dim(layer);
  if (local && config.rope_local_plain) {  // Gemma 3/4: sliding layers' own, unscaled RoPE
    params.rotary_dim = head_dim;
    return params;
  }
  // The small epsilon keeps factors like 0.4 * 80 (= 31.999... in binary) from losing a pair.
  const auto partial =
      static_cast<int64_t>(std::floor(static_cast<double>(head_dim) * config.partial_rotary_factor + 1e-9));
  params.rotary_dim = config.uses_mla() ? config.qk_rope_head_dim : partial - partial % 2;
  if (config.rope_scaling == "linear" || config.rope_scaling == "proportional") {
    params.scaling.type = RopeScalingType::linear;
    params.scaling.factor = config.rope_scaling_factor;
    if (config.rope_scaling == "proportional") {  // the whole head pairs up; int(p * head_dim // 2) pairs rotate
      params.rotary_dim = head_dim;
      params.scaling.rotated_pairs = partial / 2;
    }
  } else if (config.rope_scaling == "llama3") {
    params.scaling.type = RopeScalingType::llama3;
    params.scaling.factor = config.rope_scaling_factor;
    params.scaling.low_freq_factor = config.rope_low_freq_factor;
    params.scaling.high_freq_factor = config.rope_high_freq_factor;
    params.scaling.original_max_position_embeddings = static_cast<double>(config.rope_original_max_position);
  } else if (config.rope_scaling == "yarn") {
    params.scaling.type = RopeScalingType::yarn;
    params.scaling.factor = config.rope_scaling_factor;
    params.scaling.original_max_position_embeddings = static_cast<double>(config.rope_original_max_position);
    params.scaling.beta_fast = config.rope_yarn_beta_fast;
    params.scaling.beta_slow = config.rope_yarn_beta_slow;
    params.scaling.truncate = config.rope_yarn_truncate;
    params.attention_factor = config.rope_attention_factor > 0
                                  ? config.rope_attention_factor
                                  : yarn_attention_factor(config.rope_scaling_factor, config.rope_yarn_mscale,
                                                          config.rope_yarn_mscale_all_dim);
  }
  return params;
}

Var head_norm(Tape& tape, const BlockContext& context, const Var& x, const Var& weight) {
  const Shape shape = x->value.shape();
  Var rows = autograd::reshape(tape, x, {shape[0] * shape[1] * shape[2], shape[3]});
  return autograd::reshape(tape, norm(tape, context, rows, weight), shape);
}

// Appends this call's keys and values to the cache and returns views of everything cached so far.
static void append_to_cache(const BlockContext& context, const Var& k, const Var& v, Var* all_k, Var* all_v) {
  KvCache& cache = *context.cache;
  *all_k = autograd::make_var(append_tokens(cache.keys[context.layer], context.position_offset, k->value));
  *all_v = autograd::make_var(append_tokens(cache.values[context.layer], context.position_offset, v->value));
}

Var self_attention(Tape& tape, const BlockContext& context, const AttentionWeights& weights, const Var& x) {
  const ModelConfig& config = *context.config;
  const int64_t batch = context.batch, seq = context.seq, head_dim = config.resolved_head_dim();
  const bool has_qk_norm = weights.q_norm && *weights.q_norm;
  const bool full_width_norm = has_qk_norm && config.qk_norm_full_width;
  // full_width_norm: RMSNorm over the whole projection (OLMoE) before splitting into heads.
  auto project = [&](const Var* weight, const Var* bias, const Var* full_norm, int64_t heads) {
    Var rows = autograd::linear(tape, x, *weight, bias && *bias ? *bias : nullptr);
    if (full_norm) rows = norm(tape, context, rows, *full_norm);
    return autograd::reshape(tape, rows, {batch, seq, heads, head_dim});
  };
  Var q = project(weights.q_proj, weights.q_bias, full_width_norm ? weights.q_norm : nullptr, config.n_heads);
  Var k = project(weights.k_proj, weights.k_bias, full_width_norm ? weights.k_norm : nullptr, config.n_kv_heads);
  Var v = project(weights.v_proj, weights.v_bias, nullptr, config.n_kv_heads);
  if (has_qk_norm && !full_width_norm) {
    q = head_norm(tape, context, q, *weights.q_norm);
    k = head_norm(tape, context, k, *weights.k_norm);
  }
  const RopeParams rope = rope_params(config, context.layer, context.position_offset);
  q = autograd::rope(tape, q, rope);
  k = autograd::rope(tape, k, rope);
  if (context.cache) append_to_cache(context, k, v, &k, &v);

  FlashAttentionOptions options;
  options.causal = true;
  options.scale = config.attention_scale;
  options.softcap = config.attn_logit_softcap;
  options.window = config.layer_is_local(context.layer) ? config.sliding_window : 0;
  // A bf16 attention whose only reader is a bf16 o projection keeps o in bf16 (no widening pass).
  const DType attention_output_dtype =
      context.attention_dtype == DType::bf16 ? products_input_dtype({weights.o_proj}) : DType::f32;
  Var attended = weights.sinks && *weights.sinks
                     ? autograd::attention_with_sinks(tape, q, k, v, *weights.sinks, options)
                     : autograd::attention(tape, q, k, v, options, context.attention_dtype, attention_output_dtype);
  Var rows = autograd::reshape(tape, attended, {batch * seq, config.n_heads * head_dim});
  return autograd::linear(tape, rows, *weights.o_proj, weights.o_bias && *weights.o_bias ? *weights.o_bias : nullptr);
}

Var gated_mlp(Tape& tape, const BlockContext& context, const MlpWeights& weights, const Var& x) {
  const GatedActivation activation =
      context.config->ffn_activation == FfnActivation::silu ? GatedActivation::silu : GatedActivation::gelu_tanh;
  Var gate = autograd::linear(tape, x, *weights.gate_proj);
  Var up = autograd::linear(tape, x, *weights.up_proj);
  // bf16 training: the activation writes down_proj's bf16 input and gate/up's bf16 gradients itself.
  const DType hidden_dtype = products_input_dtype({weights.gate_proj, weights.up_proj, weights.down_proj});
  Var hidden = autograd::gated_activation(tape, gate, up, activation, hidden_dtype);
  return autograd::linear(tape, hidden, *weights.down_proj);
}

}  // namespace lathe
