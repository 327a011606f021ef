// DeepSeek-V2 and V2-Lite (DeepseekV2ForCausalLM, transformers 5.x models/deepseek_v2): the
// DeepSeek layer (models/deepseek_layer.h) with
//   - a softmax router whose top-k weights are NOT renormalised (transformers' V2 router ignores
//     norm_topk_prob), times routed_scaling_factor; topk_method "greedy", or
//     "group_limited_greedy" (n_group groups scored by their best expert, topk_group kept);
//   - RoPE always interleaved (V2 rotates complex pairs), YaRN with its softmax mscale;
//   - V2-Lite: no query compression (q_lora_rank null: a full q_proj).
// No selection bias, no multi-token prediction. Default chat template: plain.
#include "lathe/models/deepseek_layer.h"

namespace lathe {

namespace {

const HfMoe kDeepseekV2Moe = {
    .experts_key = "n_routed_experts",
    .experts_alias_key = "num_experts",
    .default_experts = 64,
    .default_top_k = 0,  // None in DeepseekV2Config: a config must give num_experts_per_tok
    .expert_ffn_key = "moe_intermediate_size",
    .default_expert_ffn = 1407,
    .renormalize_key = nullptr,
    .default_renormalize = false,
    .default_aux_loss_coef = 0.0,  // DeepseekV2ForCausalLM adds no load-balancing loss
    .sparse_step_keys = false,
    .default_shared_ffn = 0,
    .qkv_bias_key = nullptr,
    .checkpoint_block = "mlp",
    .gate_proj = "gate_proj",
    .up_proj = "up_proj",
    .down_proj = "down_proj",
};

const HfDeepseek kDeepseekV2 = {
    .scoring = "softmax",
    .topk_method = "greedy",
    .selection_bias = false,
    .renormalize_key = false,
    .rope_interleave_key = false,
    .default_shared_experts = 2,
    .default_first_dense = 0,
    .default_routed_scaling = 1.0,
    .default_n_group = 0,
    .default_topk_group = 0,
    .group_score_experts = 1,
    .default_mtp_layers = 0,
};

}  // namespace

const FamilySpec& deepseek_v2_family() {
  static const FamilySpec spec = {
      .name = "deepseek_v2",
      .hf = {.architecture = "DeepseekV2ForCausalLM",
             .model_type = "deepseek_v2",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::none,
             .export_false_keys = {"attention_bias", "mlp_bias"},
             .moe = &kDeepseekV2Moe,
             .deepseek = &kDeepseekV2},
      .traits = {},
      .default_chat_template = "plain",
      .layer = kDeepseekLayer,
  };
  return spec;
}

}  // namespace lathe
