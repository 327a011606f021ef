// Qwen3-MoE (Qwen3MoeForCausalLM): the Qwen3 block (per-head q/k RMSNorm) with mixture-of-experts
// feed-forwards (models/moe_layer.h): softmax router, top-8 of 128 by default, renormalised only
// with norm_topk_prob; decoder_sparse_step and mlp_only_layers keep some layers dense. Default
// chat template: ChatML.
#include "lathe/models/blocks.h"

namespace lathe {

namespace {

const HfMoe kQwen3Moe = {
    .experts_key = "num_experts",
    .experts_alias_key = "num_local_experts",
    .default_experts = 128,
    .default_top_k = 8,
    .expert_ffn_key = "moe_intermediate_size",
    .default_expert_ffn = 768,
    .renormalize_key = "norm_topk_prob",
    .default_renormalize = false,
    .default_aux_loss_coef = 0.001,
    .sparse_step_keys = true,
    .default_shared_ffn = 0,
    .qkv_bias_key = nullptr,
    .checkpoint_block = "mlp",
    .gate_proj = "gate_proj",
    .up_proj = "up_proj",
    .down_proj = "down_proj",
};

}  // namespace

const FamilySpec& qwen3_moe_family() {
  static const FamilySpec spec = {
      .name = "qwen3_moe",
      .hf = {.architecture = "Qwen3MoeForCausalLM",
             .model_type = "qwen3_moe",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::disabled,
             .export_false_keys = {"attention_bias"},
             .moe = &kQwen3Moe,
             .default_kv_heads = 4,
             .default_max_position = 32768},
      .traits = {.qk_norm = true},
      .default_chat_template = "chatml",
      .layer = kPreNormDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
