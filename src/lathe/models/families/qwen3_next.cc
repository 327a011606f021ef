// Qwen3-Next (Qwen3NextForCausalLM): the hybrid layer of models/qwen3_next_layer.h with the fused
// in_proj_qkvz / in_proj_ba projections: gated delta net layers and, every full_attention_interval-th
// layer (4 by default), gated full attention (output gate from q_proj, a quarter of each head
// rotated, per-head q/k RMSNorm); RMSNorm weights stored as w around 1 + w (offset 1); mixture-of-experts
// feed-forwards as Qwen2-MoE's (softmax router, top-10 of 512 by default, renormalised, a shared expert
// behind a sigmoid gate; decoder_sparse_step and mlp_only_layers keep layers dense). The config keys of
// the linear-attention layers are read and written by models/hf/hf_qwen3_next.cc. Default chat
// template: ChatML.
#include "lathe/models/qwen3_next_layer.h"

namespace lathe {

namespace {

const HfMoe kQwen3NextMoe = {
    .experts_key = "num_experts",
    .experts_alias_key = "num_local_experts",
    .default_experts = 512,
    .default_top_k = 10,
    .expert_ffn_key = "moe_intermediate_size",
    .default_expert_ffn = 512,
    .renormalize_key = "norm_topk_prob",
    .default_renormalize = true,
    .default_aux_loss_coef = 0.001,
    .sparse_step_keys = true,
    .default_shared_ffn = 512,
    .qkv_bias_key = nullptr,
    .checkpoint_block = "mlp",
    .gate_proj = "gate_proj",
    .up_proj = "up_proj",
    .down_proj = "down_proj",
};

}  // namespace

const FamilySpec& qwen3_next_family() {
  static const FamilySpec spec = {
      .name = "qwen3_next",
      .hf = {.architecture = "Qwen3NextForCausalLM",
             .model_type = "qwen3_next",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::none,
             .export_false_keys = {"attention_bias"},
             .moe = &kQwen3NextMoe,
             .linear_attention_keys = true,
             .default_kv_heads = 2,
             .default_head_dim = 256,
             .default_max_position = 32768},
      .traits = {.qk_norm = true, .norm_weight_offset = 1.0f, .attention_output_gate = true},
      .default_chat_template = "chatml",
      .layer = kQwen3NextLayer,
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
