// Mixtral (MixtralForCausalLM): the Mistral block with every feed-forward a mixture of experts
// (models/moe_layer.h): softmax router, top-2 of 8 experts by default, weights always
// renormalised over the chosen two. Checkpoints name the experts
// block_sparse_moe.experts.<e>.w1 (gate), w3 (up), w2 (down). Default chat template: [INST].
#include "lathe/models/blocks.h"

namespace lathe {

namespace {

const HfMoe kMixtralMoe = {
    .experts_key = "num_local_experts",
    .experts_alias_key = "num_experts",
    .default_experts = 8,
    .default_top_k = 2,
    .expert_ffn_key = "intermediate_size",
    .default_expert_ffn = 14336,
    .renormalize_key = nullptr,
    .default_renormalize = true,
    .default_aux_loss_coef = 0.001,
    .sparse_step_keys = false,
    .default_shared_ffn = 0,
    .qkv_bias_key = nullptr,
    .checkpoint_block = "block_sparse_moe",
    .gate_proj = "w1",
    .up_proj = "w3",
    .down_proj = "w2",
};

}  // namespace

const FamilySpec& mixtral_family() {
  static const FamilySpec spec = {
      .name = "mixtral",
      .hf = {.architecture = "MixtralForCausalLM",
             .model_type = "mixtral",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::every_layer,
             .export_false_keys = {},
             .moe = &kMixtralMoe,
             .default_kv_heads = 8,
             .default_norm_eps = 1e-5,
             .default_rope_theta = 1e6,
             .default_max_position = 131072},
      .traits = {},
      .default_chat_template = "mistral",
      .layer = kPreNormDecoderLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
