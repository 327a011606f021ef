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

// default_top_k 0: None in DeepseekV2Config, a config must give num_experts_per_tok
constexpr HfMoe kDeepseekV2Moe = deepseek_hf_moe("num_experts", 64, 0, 1407, nullptr, false);

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
  static const FamilySpec spec =
      deepseek_family_spec("deepseek_v2", "DeepseekV2ForCausalLM", "deepseek_v2", &kDeepseekV2Moe, &kDeepseekV2,
                           {"attention_bias", "mlp_bias"}, 2048);
  return spec;
}

}  // namespace lathe
