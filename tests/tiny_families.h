// Tiny configs of every family that runs on a GPU, each with the mechanisms that set it apart from
// Llama: what the simulated-device tests (train/device_training_test.cc, infer/generator_device_test.cc)
// run each family with. The two MoE families between them take every router option and loss:
// Mixtral softmax top-2 with renormalised weights, the aux loss and the z-loss; Qwen3-MoE (as a
// test, not its checkpoints) sigmoid scores, group-limited routing and the aux-loss-free bias update.
#pragma once

#include <string>

#include "lathe/models/model_config.h"
#include "tiny_model.h"

namespace lathe {

// `base` (a tiny Llama: tiny_model.h) made a tiny model of `family`.
inline ModelConfig tiny_family_model(ModelConfig model, const std::string& family) {
  model.family = family;
  if (family == "mistral") {
    model.sliding_window = 6;  // shorter than the 16-token sequences
  } else if (family == "qwen2") {
    model.attention_bias = true;
  } else if (family == "qwen3") {
    model.qk_norm = true;
    model.tie_embeddings = true;
  } else if (family == "gemma2" || family == "gemma3") {
    model.sandwich_norms = true;
    model.ffn_activation = FfnActivation::gelu_tanh;
    model.embedding_scale = 0;  // sqrt(d_model)
    model.norm_weight_offset = 1;
    model.sliding_window = 6;
    model.sliding_window_pattern = 2;
    model.rope_local_theta = 100;
    model.tie_embeddings = true;
    if (family == "gemma2") {
      model.final_logit_softcap = 3;
      model.attn_logit_softcap = 2;
    } else {
      model.qk_norm = true;
      model.rope_local_plain = true;
    }
  } else if (family == "mixtral") {
    model.moe_experts = 4;
    model.moe_top_k = 2;
    model.moe_ffn_dim = 32;
    model.moe_renormalize = true;
    model.moe_z_loss_coef = 0.01;
  } else if (family == "qwen3_moe") {
    model.qk_norm = true;
    model.moe_experts = 8;
    model.moe_top_k = 3;
    model.moe_ffn_dim = 24;
    model.moe_renormalize = false;
    model.moe_router_scoring = "sigmoid";
    model.moe_groups = 4;
    model.moe_topk_groups = 2;
    model.moe_group_score_experts = 1;
    model.moe_routed_scaling = 2.5;
    model.moe_bias_update_rate = 0.01;
    model.moe_aux_loss_coef = 0;
  } else if (family == "qwen2_moe") {
    model.attention_bias = true;
    model.moe_experts = 4;
    model.moe_top_k = 2;
    model.moe_ffn_dim = 16;
    model.moe_shared_ffn_dim = 24;
    model.moe_shared_gate = true;
  } else if (family == "deepseek_v2" || family == "deepseek_v3") {
    model.n_layers = 2;  // layer 0 dense, layer 1 DeepSeekMoE
    make_tiny_deepseek(model, family == "deepseek_v3");
    if (family == "deepseek_v3") model.mtp_layers = 1, model.mtp_loss_weight = 0.3;  // multi-token prediction
  } else if (family == "gemma4") {
    // models/gemma4_layer.h: sliding and global layers of different widths (global: 12 wide, one
    // key/value head, k = v), value norm, per-layer embeddings, proportional partial RoPE on the
    // global layers, the last two layers sharing keys and values with the double-wide MLP, soft-capping.
    make_tiny_gemma4(model);
    model.n_layers = 4;
    model.final_logit_softcap = 30;
    model.sliding_window = 6;
    model.sliding_window_pattern = 2;
    model.global_head_dim = 12;
    model.global_kv_heads = 1;
    model.per_layer_input_dim = 3;
    model.kv_shared_layers = 2;
    model.double_wide_mlp = true;
    model.moe_experts = 4;  // the MoE block beside the dense MLP, its router's per-expert scale
    model.moe_top_k = 2;
    model.moe_ffn_dim = 16;
    model.moe_aux_loss_coef = 0.1;
  } else if (family == "gpt_oss") {  // sinks, q/k/v/o biases, biased router, expert biases, clamped SwiGLU
    model.attention_bias = true;
    model.sliding_window = 6;
    model.sliding_window_pattern = 2;
    model.moe_experts = 4;
    model.moe_top_k = 2;
    model.moe_ffn_dim = 16;
    model.moe_aux_loss_coef = 0.1;
  } else if (family == "qwen3_next" || family == "qwen3_5_text") {
    make_tiny_qwen3_next(model, family);
  } else if (family == "mamba2") {  // the SSD scan, the short convolution, the gated norm in 2 groups
    model.n_kv_heads = model.n_heads;
    model.head_dim = 6;  // inner width 24 = 0.75 d_model
    model.ssm_state_size = 5;
    model.ssm_groups = 2;
    model.ssm_conv_bias = true;
    model.ssm_dt_min = 0.02;  // the step size's clamp on both sides
    model.ssm_dt_max = 0.5;
  } else if (family == "olmoe") {
    model.qk_norm = true;
    model.qk_norm_full_width = true;
    model.moe_experts = 4;
    model.moe_top_k = 2;
    model.moe_ffn_dim = 16;
  }
  return model;
}

}  // namespace lathe
