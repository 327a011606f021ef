// The standard decoder layer that the Llama-style and Gemma-style families share: grouped-query
// self-attention (optional q/k/v biases and per-head q/k norms, as the config says) and a gated
// MLP, each behind norms. A family file (models/families/) picks its norm names and block wiring
// from here; a family with another layer (experts, latent attention, a recurrent state) declares
// its own parameters and block in its own file instead.
//
// Norm names are the family's, in its order: Llama ("input_layernorm", "post_attention_layernorm"),
// Gemma (the same plus "pre_feedforward_layernorm", "post_feedforward_layernorm").
#pragma once

#include <span>

#include "lathe/models/family_spec.h"

namespace lathe {

// The slots of the standard decoder layer's LayerParameters.
enum DecoderSlot : int {
  kNorm0,
  kNorm1,
  kNorm2,
  kNorm3,
  kQProj,
  kKProj,
  kVProj,
  kOProj,
  kQBias,
  kKBias,
  kVBias,
  kQNorm,
  kKNorm,
  kGateProj,
  kUpProj,
  kDownProj,
  // A mixture-of-experts layer's feed-forward (models/moe_layer.h) instead of gate/up/down.
  kRouter,
  kExpertsGateUp,
  kExpertsDown,
  kSharedGateProj,
  kSharedUpProj,
  kSharedDownProj,
  kSharedExpertGate,
  kSelectionBias,  // the router's selection bias (moe_bias_update_rate > 0)
  kDecoderSlotCount
};

// The layer's parameters in lathe's (and HF's) creation order: norm 0, q/k/v (+ biases), o,
// q/k norms, the other norms, then the feed-forward: gate/up/down for a dense layer, or for a
// mixture-of-experts layer (config.layer_is_moe) the router, the stacked expert weights and the
// optional shared expert and its gate. norm_names: 2 (pre-norm) or 4 (sandwich) names.
std::vector<LayerParameterSpec> decoder_layer_parameters(const ModelConfig& config, int64_t layer,
                                                         std::span<const char* const> norm_names);
// Appends the feed-forward's parameters of layer `layer` (DecoderSlot slots): gate/up/down for a
// dense layer; for a mixture-of-experts layer the router "mlp.gate.weight", its selection bias
// "mlp.gate.e_score_correction_bias" (moe_bias_update_rate > 0), the stacked experts and the
// optional shared expert "<shared_expert_prefix>.{gate,up,down}_proj.weight" ("mlp.shared_expert"
// for Qwen2-MoE, "mlp.shared_experts" for DeepSeek) with its gate.
void add_feed_forward_parameters(const ModelConfig& config, int64_t layer, const char* shared_expert_prefix,
                                 std::vector<LayerParameterSpec>& out);
// The two standard norm sets under Hugging Face's names: pre-norm (input_layernorm,
// post_attention_layernorm) for pre_norm_block, and sandwich (those plus pre_feedforward_layernorm,
// post_feedforward_layernorm) for sandwich_block.
std::vector<LayerParameterSpec> pre_norm_layer_parameters(const ModelConfig& config, int64_t layer);
std::vector<LayerParameterSpec> sandwich_layer_parameters(const ModelConfig& config, int64_t layer);

// The feed-forward of a layer: the gated MLP, or the mixture of experts where the layer has a router.
autograd::Var feed_forward(autograd::Tape& tape, const BlockContext& context, const LayerParameters& parameters,
                           const autograd::Var& x);

// h = h + attention(norm_0(h));  h = h + ffn(norm_1(h))      (Llama, Mistral, Qwen, Mixtral, OLMoE)
autograd::Var pre_norm_block(autograd::Tape& tape, const BlockContext& context, const LayerParameters& parameters,
                             const autograd::Var& h);
// h = h + norm_1(attention(norm_0(h)));  h = h + norm_3(ffn(norm_2(h)))  (Gemma 2/3 "sandwich")
autograd::Var sandwich_block(autograd::Tape& tape, const BlockContext& context, const LayerParameters& parameters,
                             const autograd::Var& h);

// What the feed-forward of layer `layer` keeps per token: {everything, the matmul outputs alone}.
LayerActivationCounts feed_forward_counts(const ModelConfig& config, int64_t layer);
// What one standard layer keeps per token (models/memory_estimate.h lists the terms).
LayerActivationCounts decoder_activation_counts(const ModelConfig& config, int64_t layer);
// Causal attention: 6 * n_heads * head_dim * seq per token (half the full score matrix, the
// FlashAttention convention), forward + backward.
double causal_attention_training_flops_per_token(const ModelConfig& config, int64_t seq_len);
// n_layers caches of (1, max_seq, n_kv_heads, head_dim).
KvCache make_decoder_kv_cache(const ModelConfig& config, int64_t max_seq);

// A standard decoder layer with the given parameter list and block (the counts, FLOPs and KV
// cache are the same for both norm layouts).
constexpr LayerSpec standard_decoder_layer(decltype(LayerSpec::parameters) parameters,
                                           decltype(LayerSpec::block) block) {
  return {
      .parameters = parameters,
      .slot_count = kDecoderSlotCount,
      .block = block,
      .activation_counts = decoder_activation_counts,
      .attention_training_flops_per_token = causal_attention_training_flops_per_token,
      .make_kv_cache = make_decoder_kv_cache,
      .supports_expert_parallel = true,
  };
}

// The lathe name of a tensor of a multimodal Gemma checkpoint (HfMultimodalWrapper::lathe_name):
// transformers 5.x "model.language_model.X" and 4.x "language_model.model.X" -> "model.X", the LM
// head -> "lm_head.weight"; "" for a tensor under one of `skipped` (the towers lathe does not
// model); anything else as it is (the loader reports it as unexpected).
std::string multimodal_text_weight_name(const std::string& hf_name, std::span<const char* const> skipped);

// The two standard layers, ready for a FamilySpec's `layer`.
inline constexpr LayerSpec kPreNormDecoderLayer = standard_decoder_layer(pre_norm_layer_parameters, pre_norm_block);
inline constexpr LayerSpec kSandwichDecoderLayer = standard_decoder_layer(sandwich_layer_parameters, sandwich_block);

}  // namespace lathe
