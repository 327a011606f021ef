// The Gemma 4 text decoder layer (transformers 5.x models/gemma4/modeling_gemma4.py,
// Gemma4TextDecoderLayer) and its model-level per-layer embeddings, for families/gemma4.cc. Every
// mechanism is a ModelConfig value, so a config that switches one off is still a Gemma 4 model:
//   - attention geometry per layer type: sliding layers have head_dim and n_kv_heads, global layers
//     global_head_dim and global_kv_heads (model_config.h layer_head_dim / layer_kv_heads); the
//     score scale is attention_scale (1 on import: q and k are RMS-normalised per head);
//   - q/k RMSNorm per head, the values RMS-normalised without a weight (value_norm);
//   - attention_k_eq_v: global layers have no v_proj, the values are the raw k_proj output;
//   - KV sharing: the last kv_shared_layers layers have no k/v projections and attend to the keys
//     and values of kv_source_layer (the last earlier layer of their type), in training (through
//     BlockContext::layer_key_values, gradients included) and in generation (the source's cache);
//   - double_wide_mlp: the KV-sharing layers' MLP is 2 * ffn_dim wide;
//   - the MoE block beside the dense MLP (moe_experts > 0): the router reads the residual stream
//     RMS-normalised without a weight, times router.scale and d_model^-0.5; softmax top-k,
//     renormalised, times router.per_expert_scale of each chosen expert; the experts (the shared
//     models/moe_layer.h routed_experts) read pre_feedforward_layernorm_2 of the residual stream;
//     the two branches are normalised (post_feedforward_layernorm_1/_2), summed, normalised again;
//   - per-layer embeddings (per_layer_input_dim > 0): the layer's input p (ModelInputsSpec below)
//     gates its output through per_layer_input_gate, GeGLU, per_layer_projection and
//     post_per_layer_input_norm, added to the residual stream;
//   - layer_scalar: a (1) buffer, loaded and saved, multiplying the layer's output (never trained).
// Parameters per layer, under transformers' names (d = d_model, D = the layer's head_dim, K = its
// key/value heads, F = the MLP width, P = per_layer_input_dim, E = moe_experts, f = expert width):
//   self_attn.q_proj.weight (H D, d), q_norm.weight (D), k_proj.weight (K D, d), k_norm.weight (D),
//   v_proj.weight (K D, d) (not with k_eq_v on global layers; no k/v at all on KV-sharing layers),
//   o_proj.weight (d, H D); mlp.{gate,up}_proj.weight (F, d), mlp.down_proj.weight (d, F);
//   input_layernorm, post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm (d);
//   layer_scalar (1); per_layer_input_gate.weight (P, d), per_layer_projection.weight (d, P),
//   post_per_layer_input_norm.weight (d); router.proj.weight (E, d), router.scale (d),
//   router.per_expert_scale (E), experts.gate_up_proj (E, 2f, d), experts.down_proj (E, d, f),
//   post_feedforward_layernorm_1, post_feedforward_layernorm_2, pre_feedforward_layernorm_2 (d).
// Model-level (ModelInputsSpec): embed_tokens_per_layer.weight (per_layer_input_vocab, L P),
// per_layer_model_projection.weight (L P, d), per_layer_projection_norm.weight (P), and
//   p_l = (rmsnorm(x W^T d^-0.5)_l + sqrt(P) E_ple[ids]_l) / sqrt(2)   (x: the scaled embeddings).
#pragma once

#include "lathe/models/blocks.h"

namespace lathe {

// Slots past the standard decoder's (the norms, q/k/v/o, q/k norms, MLP, router and experts are
// shared with DecoderSlot).
enum Gemma4Slot : int {
  kLayerScalar = kDecoderSlotCount,
  kPerLayerInputGate,
  kPerLayerProjection,
  kPostPerLayerInputNorm,
  kRouterScale,
  kPerExpertScale,
  kPostFeedforwardNorm1,
  kPostFeedforwardNorm2,
  kPreFeedforwardNorm2,
  kGemma4SlotCount
};

std::vector<LayerParameterSpec> gemma4_layer_parameters(const ModelConfig& config, int64_t layer);
autograd::Var gemma4_block(autograd::Tape& tape, const BlockContext& context, const LayerParameters& parameters,
                           const autograd::Var& h);
LayerActivationCounts gemma4_activation_counts(const ModelConfig& config, int64_t layer);
// Causal attention FLOPs averaged over the layers (their head widths differ).
double gemma4_attention_training_flops_per_token(const ModelConfig& config, int64_t seq_len);
// Per layer (1, max_seq, K, D); the KV-sharing layers keep none.
KvCache make_gemma4_kv_cache(const ModelConfig& config, int64_t max_seq);

inline constexpr LayerSpec kGemma4Layer = {
    .parameters = gemma4_layer_parameters,
    .slot_count = kGemma4SlotCount,
    .block = gemma4_block,
    .activation_counts = gemma4_activation_counts,
    .attention_training_flops_per_token = gemma4_attention_training_flops_per_token,
    .make_kv_cache = make_gemma4_kv_cache,
    .supports_expert_parallel = false,
};

// The per-layer embeddings (model-level slots below).
enum Gemma4InputSlot : int { kPerLayerEmbedding, kPerLayerModelProjection, kPerLayerProjectionNorm, kGemma4InputSlots };
extern const ModelInputsSpec kGemma4PerLayerInputs;

}  // namespace lathe
