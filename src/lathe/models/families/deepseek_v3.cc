// DeepSeek-V3 (DeepseekV3ForCausalLM, transformers 5.x models/deepseek_v3): the DeepSeek layer
// (models/deepseek_layer.h: multi-head latent attention, dense first_k_dense_replace layers, then
// DeepSeekMoE) with
//   - a sigmoid router, group-limited top-k (n_group groups scored by their best two, topk_group
//     kept), renormalised weights (norm_topk_prob) times routed_scaling_factor;
//   - the aux-loss-free selection bias mlp.gate.e_score_correction_bias: loaded, exported, and
//     trained by DeepSeek's update rule (model.moe_bias_update_rate, 0.001 on import; transformers
//     keeps it fixed);
//   - interleaved RoPE (rope_interleave, default true) and YaRN with its softmax mscale;
//   - multi-token prediction modules (num_mtp_layers) stored as layers num_hidden_layers + k,
//     which DeepseekV3ForCausalLM ignores on load (models/transformer.h).
// Default chat template: plain.
#include "lathe/models/deepseek_layer.h"

namespace lathe {

namespace {

const HfMoe kDeepseekV3Moe = {
    .experts_key = "n_routed_experts",
    .experts_alias_key = "num_local_experts",
    .default_experts = 256,
    .default_top_k = 8,
    .expert_ffn_key = "moe_intermediate_size",
    .default_expert_ffn = 2048,
    .renormalize_key = "norm_topk_prob",
    .default_renormalize = true,
    .default_aux_loss_coef = 0.0,  // DeepseekV3ForCausalLM adds no load-balancing loss
    .sparse_step_keys = false,
    .default_shared_ffn = 0,
    .qkv_bias_key = nullptr,
    .checkpoint_block = "mlp",
    .gate_proj = "gate_proj",
    .up_proj = "up_proj",
    .down_proj = "down_proj",
};

const HfDeepseek kDeepseekV3 = {
    .scoring = "sigmoid",
    .topk_method = "noaux_tc",
    .selection_bias = true,
    .renormalize_key = true,
    .rope_interleave_key = true,
    .default_shared_experts = 1,
    .default_first_dense = 3,
    .default_routed_scaling = 2.5,
    .default_n_group = 8,
    .default_topk_group = 4,
    .group_score_experts = 2,
    .default_mtp_layers = 1,
};

}  // namespace

const FamilySpec& deepseek_v3_family() {
  static const FamilySpec spec = {
      .name = "deepseek_v3",
      .hf = {.architecture = "DeepseekV3ForCausalLM",
             .model_type = "deepseek_v3",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::none,
             .export_false_keys = {"attention_bias"},
             .moe = &kDeepseekV3Moe,
             .deepseek = &kDeepseekV3},
      .traits = {},
      .default_chat_template = "plain",
      .layer = kDeepseekLayer,
  };
  return spec;
}

}  // namespace lathe
