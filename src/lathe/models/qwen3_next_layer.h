// The Qwen3-Next decoder layer (transformers 5.x models/qwen3_next/modeling_qwen3_next.py,
// Qwen3NextDecoderLayer) and the Qwen3.5 text layer built from the same pieces
// (models/qwen3_5/modeling_qwen3_5.py, Qwen3_5DecoderLayer), for families/qwen3_next.cc and
// families/qwen3_5_text.cc. Pre-norm: h += mixer(norm(h)); h += ffn(norm(h)), where the mixer is per
// layer (model_config.h layer_is_linear_attention):
//   - full_attention: GQA attention with per-head q/k RMSNorm and partial RoPE; with
//     attention_output_gate q_proj yields per head [query (D), gate (D)] and the attention output is
//     multiplied by sigmoid(gate) before o_proj;
//   - linear_attention, the gated delta net: projections give q, k (Hk heads of Dk), v, z (Hv heads of
//     Dv) and per value head b, a; a causal depthwise convolution (linear_conv_kernel wide, SiLU) runs
//     over the q/k/v channels in the order [q (Hk Dk) | k (Hk Dk) | v (Hv Dv)]; then
//       beta = sigmoid(b),  g = -exp(A_log) * softplus(a + dt_bias)
//       o = gated_delta_rule(l2norm(q), l2norm(k), v, g, beta)      (ops/gated_delta_rule.h)
//       out = out_proj(rmsnorm(o) * norm.weight * silu(z))           per value head, no weight offset
// The feed-forward is blocks.h's: the dense MLP, or the MoE with its sigmoid-gated shared expert.
// Two projection layouts, one LayerSpec each (the families pick theirs):
//   kQwen3NextLayer: in_proj_qkvz.weight (Hk (2 Dk + 2 r Dv), d) whose rows are grouped per key head as
//     [q (Dk), k (Dk), v (r Dv), z (r Dv)], r = Hv / Hk, and in_proj_ba.weight (Hk 2 r, d) grouped as
//     [b (r), a (r)] per key head (Qwen3NextGatedDeltaNet.fix_query_key_value_ordering);
//   kQwen3_5Layer: in_proj_qkv.weight (2 Hk Dk + Hv Dv, d) in channel order, in_proj_z.weight (Hv Dv, d),
//     in_proj_b.weight (Hv, d), in_proj_a.weight (Hv, d).
// Other linear-attention parameters: conv1d.weight (2 Hk Dk + Hv Dv, 1, K), dt_bias (Hv), A_log (Hv),
// norm.weight (Dv), out_proj.weight (d, Hv Dv), all under "linear_attn.".
// Generation: the full-attention layers keep keys and values; each linear-attention layer keeps the
// convolution's last K - 1 inputs (KvCache::conv_states) and the delta rule's state
// (KvCache::recurrent_states, (1, Hv, Dk, Dv)), updated in place: constant memory per token.
#pragma once

#include "lathe/models/blocks.h"

namespace lathe {

// Slots past the standard decoder's (norms, q/k/v/o, q/k norms and the feed-forward are DecoderSlot's).
enum Qwen3NextSlot : int {
  kInProjQkvz = kDecoderSlotCount,
  kInProjBa,
  kInProjQkv,
  kInProjZ,
  kInProjB,
  kInProjA,
  kConv1d,
  kDtBias,
  kALog,
  kLinearNorm,
  kOutProj,
  kQwen3NextSlotCount
};

std::vector<LayerParameterSpec> qwen3_next_layer_parameters(const ModelConfig& config, int64_t layer);
std::vector<LayerParameterSpec> qwen3_5_layer_parameters(const ModelConfig& config, int64_t layer);
autograd::Var qwen3_next_block(autograd::Tape& tape, const BlockContext& context, const LayerParameters& parameters,
                               const autograd::Var& h);
LayerActivationCounts qwen3_next_activation_counts(const ModelConfig& config, int64_t layer);
// Averaged over the layers: causal attention on the full layers, the chunked delta rule (independent
// of the sequence length) on the linear ones.
double qwen3_next_attention_training_flops_per_token(const ModelConfig& config, int64_t seq_len);
// Keys and values (1, max_seq, K, D) for the full-attention layers; for the linear ones no keys but a
// conv state (1, K - 1, 2 Hk Dk + Hv Dv) and a recurrent state (1, Hv, Dk, Dv).
KvCache make_qwen3_next_kv_cache(const ModelConfig& config, int64_t max_seq);

constexpr LayerSpec qwen3_next_layer_spec(decltype(LayerSpec::parameters) parameters) {
  return {
      .parameters = parameters,
      .slot_count = kQwen3NextSlotCount,
      .block = qwen3_next_block,
      .activation_counts = qwen3_next_activation_counts,
      .attention_training_flops_per_token = qwen3_next_attention_training_flops_per_token,
      .make_kv_cache = make_qwen3_next_kv_cache,
      .supports_expert_parallel = true,
  };
}

inline constexpr LayerSpec kQwen3NextLayer = qwen3_next_layer_spec(qwen3_next_layer_parameters);
inline constexpr LayerSpec kQwen3_5Layer = qwen3_next_layer_spec(qwen3_5_layer_parameters);

}  // namespace lathe
