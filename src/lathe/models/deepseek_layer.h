// The DeepSeek-V2/V3 decoder layer, shared by families/deepseek_v2.cc and deepseek_v3.cc:
// pre-norm, multi-head latent attention (models/mla_layer.h), and the feed-forward of
// models/blocks.h: dense for the first moe_first_dense_layers layers, then DeepSeekMoE (routed
// experts + always-on shared experts "mlp.shared_experts", sigmoid or softmax router, optional
// group-limited choice and selection bias, routed scaling). Parameters under transformers' names:
//   input_layernorm.weight, post_attention_layernorm.weight                (d_model)
//   self_attn.q_proj.weight               (H * (dn + dr), d_model)          q_lora_rank == 0
//   self_attn.q_a_proj.weight             (q_lora_rank, d_model)            q_lora_rank > 0
//   self_attn.q_a_layernorm.weight        (q_lora_rank)
//   self_attn.q_b_proj.weight             (H * (dn + dr), q_lora_rank)
//   self_attn.kv_a_proj_with_mqa.weight   (kv_lora_rank + dr, d_model)
//   self_attn.kv_a_layernorm.weight       (kv_lora_rank)
//   self_attn.kv_b_proj.weight            (H * (dn + dv), kv_lora_rank)
//   self_attn.o_proj.weight               (d_model, H * dv)
//   mlp.*                                 blocks.h add_feed_forward_parameters
#pragma once

#include "lathe/models/blocks.h"
#include "lathe/models/mla_layer.h"

namespace lathe {

// Slots past the standard decoder's (kNorm0/kNorm1, kQProj, kOProj and the feed-forward slots are
// shared with DecoderSlot).
enum DeepseekSlot : int {
  kQAProj = kDecoderSlotCount,
  kQANorm,
  kQBProj,
  kKvAProj,
  kKvANorm,
  kKvBProj,
  kDeepseekSlotCount
};

std::vector<LayerParameterSpec> deepseek_layer_parameters(const ModelConfig& config, int64_t layer);
// h = h + mla(norm_0(h));  h = h + ffn(norm_1(h))
autograd::Var deepseek_block(autograd::Tape& tape, const BlockContext& context, const LayerParameters& parameters,
                             const autograd::Var& h);
LayerActivationCounts deepseek_activation_counts(const ModelConfig& config, int64_t layer);

// Both families' MoE checkpoint conventions: "n_routed_experts" (alias `experts_alias_key`),
// "moe_intermediate_size", per-expert mlp.experts.<e>.{gate,up,down}_proj names, no router loss in
// transformers' objective; the rest as given.
constexpr HfMoe deepseek_hf_moe(const char* experts_alias_key, int64_t default_experts, int64_t default_top_k,
                                int64_t default_expert_ffn, const char* renormalize_key, bool default_renormalize) {
  return {
      .experts_key = "n_routed_experts",
      .experts_alias_key = experts_alias_key,
      .default_experts = default_experts,
      .default_top_k = default_top_k,
      .expert_ffn_key = "moe_intermediate_size",
      .default_expert_ffn = default_expert_ffn,
      .renormalize_key = renormalize_key,
      .default_renormalize = default_renormalize,
      .default_aux_loss_coef = 0.0,  // DeepseekV2/V3ForCausalLM add no load-balancing loss
      .sparse_step_keys = false,
      .default_shared_ffn = 0,  // shared experts: n_shared_experts (HfDeepseek)
      .qkv_bias_key = nullptr,
      .checkpoint_block = "mlp",
      .gate_proj = "gate_proj",
      .up_proj = "up_proj",
      .down_proj = "down_proj",
  };
}

// A DeepSeek FamilySpec: the HF architecture and model type, the MoE and DeepSeek key tables, the
// boolean keys an export writes as false, the config class's max_position_embeddings; plain chat
// template, kDeepseekLayer.
FamilySpec deepseek_family_spec(const char* name, const char* architecture, const char* model_type, const HfMoe* moe,
                                const HfDeepseek* deepseek, std::vector<const char*> export_false_keys,
                                int64_t default_max_position);

inline constexpr LayerSpec kDeepseekLayer = {
    .parameters = deepseek_layer_parameters,
    .slot_count = kDeepseekSlotCount,
    .block = deepseek_block,
    .activation_counts = deepseek_activation_counts,
    .attention_training_flops_per_token = mla_attention_training_flops_per_token,
    .make_kv_cache = make_mla_kv_cache,
    .supports_expert_parallel = true,
};

}  // namespace lathe
