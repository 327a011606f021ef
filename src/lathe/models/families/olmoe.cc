// OLMoE (OlmoeForCausalLM): the Llama block with RMSNorm on the whole q and k projections (not per
// head) and every feed-forward a mixture of experts (models/moe_layer.h): softmax router, top-8 of
// 64 by default, renormalised only with norm_topk_prob. Default chat template: plain.
#include "lathe/models/blocks.h"

namespace lathe {

namespace {

const HfMoe kOlmoeMoe = {
    .experts_key = "num_experts",
    .experts_alias_key = "num_local_experts",
    .default_experts = 64,
    .default_top_k = 8,
    .expert_ffn_key = "intermediate_size",
    .default_expert_ffn = 2048,
    .renormalize_key = "norm_topk_prob",
    .default_renormalize = false,
    .default_aux_loss_coef = 0.01,
    .sparse_step_keys = false,
    .default_shared_ffn = 0,
    .qkv_bias_key = nullptr,
    .checkpoint_block = "mlp",
    .gate_proj = "gate_proj",
    .up_proj = "up_proj",
    .down_proj = "down_proj",
};

}  // namespace

const FamilySpec& olmoe_family() {
  static const FamilySpec spec = {
      .name = "olmoe",
      .hf = {.architecture = "OlmoeForCausalLM",
             .model_type = "olmoe",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::none,
             .export_false_keys = {"attention_bias"},
             .moe = &kOlmoeMoe,
             .default_norm_eps = 1e-5,
             .default_max_position = 4096},
      .traits = {.qk_norm = true, .qk_norm_full_width = true},
      .default_chat_template = "plain",
      .layer = kPreNormDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
