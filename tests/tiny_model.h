// The tiny decoder the model, optimizer and trainer tests build: small enough for float64
// references and finite differences. Tests name only the sizes they need to differ, e.g.
//   ModelConfig config = tiny_model_config({.vocab_size = 31, .n_layers = 1, .n_kv_heads = 2});
// and then set family traits (qk_norm, soft caps, ...) on the result.
#pragma once

#include <cstdint>
#include <string>

#include "lathe/models/model_config.h"

namespace lathe {

struct TinyModelSize {  // fields in ModelConfig's order, so designated initializers read alike
  int64_t vocab_size = 29;
  int64_t d_model = 16;
  int64_t n_layers = 2;
  int64_t n_heads = 2;
  int64_t n_kv_heads = 1;  // grouped-query attention: 2 query heads per KV head
  int64_t head_dim = 0;    // 0: d_model / n_heads
  int64_t ffn_dim = 24;
  int64_t max_seq_len = 8;
};

// A Llama-family ModelConfig of these sizes; every other field keeps ModelConfig's default.
inline ModelConfig tiny_model_config(const TinyModelSize& size = {}) {
  ModelConfig config;
  config.family = "llama";
  config.vocab_size = size.vocab_size;
  config.d_model = size.d_model;
  config.n_layers = size.n_layers;
  config.n_heads = size.n_heads;
  config.n_kv_heads = size.n_kv_heads;
  config.head_dim = size.head_dim;
  config.ffn_dim = size.ffn_dim;
  config.max_seq_len = size.max_seq_len;
  return config;
}

// DeepSeek's mechanisms on a tiny model: latent attention (values narrower than keys), layer 0
// dense, layer 1 DeepSeekMoE with a shared expert and group-limited routing; V3 adds the query
// compression, YaRN with the softmax mscale, sigmoid scores and the aux-loss-free bias.
inline void make_tiny_deepseek(ModelConfig& config, bool v3) {
  config.family = v3 ? "deepseek_v3" : "deepseek_v2";
  config.kv_lora_rank = 6;
  config.q_lora_rank = v3 ? 5 : 0;
  config.qk_nope_head_dim = 3;
  config.qk_rope_head_dim = 2;
  config.v_head_dim = 5;
  config.rope_interleave = true;
  if (v3) {
    config.rope_scaling = "yarn";
    config.rope_scaling_factor = 4;
    config.rope_original_max_position = 8;
    config.rope_yarn_mscale = 1;
    config.rope_yarn_mscale_all_dim = 0.8;
  }
  config.moe_experts = 4;
  config.moe_top_k = 2;
  config.moe_ffn_dim = 4;
  config.moe_shared_ffn_dim = v3 ? 4 : 8;
  config.moe_first_dense_layers = 1;
  config.moe_router_scoring = v3 ? "sigmoid" : "softmax";
  config.moe_renormalize = v3;
  config.moe_routed_scaling = v3 ? 2.5 : 1.5;
  config.moe_groups = 2;
  config.moe_topk_groups = v3 ? 1 : 2;
  config.moe_group_score_experts = v3 ? 2 : 1;
  config.moe_bias_update_rate = v3 ? 0.01 : 0.0;
  config.moe_aux_loss_coef = 0.1;
}

// Gemma 4's attention and block on a tiny model: q/k and value norms, sandwich norms, GeGLU,
// embeddings scaled by sqrt(d_model), attention scale 1, plain RoPE (theta 100) on the sliding
// layers and proportional partial RoPE on the global ones, k = v there, tied embeddings. The
// callers choose the layer pattern, widths, per-layer inputs, KV sharing and experts.
inline void make_tiny_gemma4(ModelConfig& config) {
  config.family = "gemma4";
  config.qk_norm = true;
  config.sandwich_norms = true;
  config.value_norm = true;
  config.ffn_activation = FfnActivation::gelu_tanh;
  config.embedding_scale = 0;
  config.attention_scale = 1;
  config.rope_local_theta = 100;
  config.rope_local_plain = true;
  config.rope_scaling = "proportional";
  config.rope_scaling_factor = 1;
  config.partial_rotary_factor = 0.5;
  config.attention_k_eq_v = true;
  config.tie_embeddings = true;
}

// Qwen3-Next / Qwen3.5 (models/qwen3_next_layer.h) on a tiny model: gated delta net, gated full
// attention, gated delta net (GQA ratio 2, key and value head widths differ, a width-3 convolution),
// partial RoPE, 1 + w norms; family qwen3_next adds the MoE with its sigmoid-gated shared expert on
// layers 0 and 2 (layer 1 dense). Sets n_layers = 3.
inline void make_tiny_qwen3_next(ModelConfig& config, const std::string& family) {
  config.family = family;
  config.n_layers = 3;
  config.layer_types = "linear_attention,full_attention,linear_attention";
  config.linear_key_heads = 1;
  config.linear_value_heads = 2;
  // Keys 8 wide: q and k are L2-normalised per head, and over 3 values some seeds met a near-zero
  // vector whose normalisation amplified float32 rounding 1000x (gradients 5% apart from float64).
  config.linear_key_head_dim = 8;
  config.linear_value_head_dim = 4;
  config.linear_conv_kernel = 3;
  config.qk_norm = true;
  config.norm_weight_offset = 1;
  config.attention_output_gate = true;
  config.partial_rotary_factor = 0.5;
  if (family == "qwen3_next") {
    config.moe_experts = 4;
    config.moe_top_k = 2;
    config.moe_ffn_dim = 5;
    config.moe_shared_ffn_dim = 6;
    config.moe_shared_gate = true;
    config.moe_dense_layers = "1";
    config.moe_aux_loss_coef = 0.1;
  }
}

}  // namespace lathe
