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
