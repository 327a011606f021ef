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

constexpr HfMoe kDeepseekV3Moe = deepseek_hf_moe("num_local_experts", 256, 8, 2048, "norm_topk_prob", true);

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
  static const FamilySpec spec = deepseek_family_spec("deepseek_v3", "DeepseekV3ForCausalLM", "deepseek_v3",
                                                      &kDeepseekV3Moe, &kDeepseekV3, {"attention_bias"}, 4096);
  return spec;
}

}  // namespace lathe
