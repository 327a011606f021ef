// Qwen2-MoE (Qwen2MoeForCausalLM): the Qwen2 block (q/k/v biases) with mixture-of-experts
// feed-forwards (models/moe_layer.h) plus a shared expert every token passes through, scaled by
// sigmoid(x . shared_expert_gate): softmax router, top-4 of 60 by default, renormalised only with
// norm_topk_prob; decoder_sparse_step and mlp_only_layers keep some layers dense. Default chat
// template: ChatML.
#include "lathe/models/blocks.h"

namespace lathe {

namespace {

const HfMoe kQwen2Moe = {
    .experts_key = "num_experts",
    .experts_alias_key = "num_local_experts",
    .default_experts = 60,
    .default_top_k = 4,
    .expert_ffn_key = "moe_intermediate_size",
    .default_expert_ffn = 1408,
    .renormalize_key = "norm_topk_prob",
    .default_renormalize = false,
    .default_aux_loss_coef = 0.001,
    .sparse_step_keys = true,
    .default_shared_ffn = 5632,
    .qkv_bias_key = "qkv_bias",
    .checkpoint_block = "mlp",
    .gate_proj = "gate_proj",
    .up_proj = "up_proj",
    .down_proj = "down_proj",
};

}  // namespace

const FamilySpec& qwen2_moe_family() {
  static const FamilySpec spec = {
      .name = "qwen2_moe",
      .hf = {.architecture = "Qwen2MoeForCausalLM",
             .model_type = "qwen2_moe",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::disabled,
             .moe = &kQwen2Moe,
             .default_kv_heads = 16,
             .default_max_position = 32768},
      .traits = {.attention_bias = true},
      .default_chat_template = "chatml",
      .layer = kPreNormDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
