// The typed description of a decoder-only transformer (Llama family and relatives). `family` names
// a FamilySpec (models/family_spec.h, one file per family in models/families/) that declares the
// layer's parameters and wires its block; the rest is values, never a branch inside a shared layer.
//
// Parameter names and layouts follow Hugging Face transformers (so checkpoints map 1:1):
//   model.embed_tokens.weight                        (vocab_size, d_model)
//   model.layers.{i}.input_layernorm.weight          (d_model)
//   model.layers.{i}.self_attn.q_proj.weight         (n_heads * head_dim, d_model)     [out, in]
//   model.layers.{i}.self_attn.k_proj.weight         (n_kv_heads * head_dim, d_model)
//   model.layers.{i}.self_attn.v_proj.weight         (n_kv_heads * head_dim, d_model)
//   model.layers.{i}.self_attn.{q,k,v}_proj.bias     (out)                 attention_bias only
//   model.layers.{i}.self_attn.o_proj.weight         (d_model, n_heads * head_dim)
//   model.layers.{i}.self_attn.q_norm.weight         (head_dim)            qk_norm only
//   model.layers.{i}.self_attn.k_norm.weight         (head_dim)            qk_norm only
//                        (n_heads * head_dim), (n_kv_heads * head_dim) with qk_norm_full_width (OLMoE)
//   model.layers.{i}.post_attention_layernorm.weight (d_model)  norm after attention (sandwich) or
//                                                              before the MLP (Llama naming)
//   model.layers.{i}.pre_feedforward_layernorm.weight  (d_model)          sandwich_norms only
//   model.layers.{i}.post_feedforward_layernorm.weight (d_model)          sandwich_norms only
//   model.layers.{i}.mlp.gate_proj.weight            (ffn_dim, d_model)
//   model.layers.{i}.mlp.up_proj.weight              (ffn_dim, d_model)
//   model.layers.{i}.mlp.down_proj.weight            (d_model, ffn_dim)
// A mixture-of-experts layer (moe_experts > 0 and layer_is_moe(i)) has instead (transformers 5.x
// in-memory names; the per-expert checkpoint names are mapped by models/hf/):
//   model.layers.{i}.mlp.gate.weight                 (moe_experts, d_model)             router
//   model.layers.{i}.mlp.experts.gate_up_proj        (moe_experts, 2 * expert_ffn, d_model)  gate rows, then up
//   model.layers.{i}.mlp.experts.down_proj           (moe_experts, d_model, expert_ffn)
//   model.layers.{i}.mlp.shared_expert.{gate,up,down}_proj.weight  as a dense MLP of
//                                                    moe_shared_ffn_dim               moe_shared_ffn_dim > 0
//   model.layers.{i}.mlp.shared_expert_gate.weight   (1, d_model)                     moe_shared_gate only
//   model.norm.weight                                (d_model)
//   lm_head.weight                                   (vocab_size, d_model)  absent when tied
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

enum class FfnActivation { silu, gelu_tanh };  // SwiGLU (Llama, Qwen, Mistral) / GeGLU (Gemma)

struct ModelConfig {
  std::string family = "llama";  // a registered family (models/families/<family>.cc)
  int64_t vocab_size = 4096;
  int64_t d_model = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 4;
  int64_t head_dim = 0;  // 0: d_model / n_heads
  int64_t ffn_dim = 1024;
  FfnActivation ffn_activation = FfnActivation::silu;
  int64_t max_seq_len = 256;

  // RoPE
  double rope_theta = 10000.0;
  double rope_local_theta = 0.0;       // theta for sliding-window layers (Gemma 3: 10000); 0: rope_theta
  double partial_rotary_factor = 1.0;  // rotary_dim = head_dim * factor (rounded down to even)
  std::string rope_scaling = "none";   // none | llama3 | yarn | linear | proportional
                                       // linear: inv_freq / factor (Gemma 3's global layers);
                                       // proportional (Gemma 4's global layers): pairs (i, i +
                                       // head_dim/2) over the whole head, frequencies theta^(-2i/head_dim)
                                       // / factor, only the first floor(partial_rotary_factor *
                                       // head_dim / 2) pairs rotate (the rest pass through)
  double rope_scaling_factor = 8.0;
  double rope_low_freq_factor = 1.0;   // llama3
  double rope_high_freq_factor = 4.0;  // llama3
  int64_t rope_original_max_position = 8192;
  double rope_yarn_beta_fast = 32.0;  // yarn: ramp bounds in rotations
  double rope_yarn_beta_slow = 1.0;
  bool rope_yarn_truncate = true;         // yarn: integer ramp bounds (GPT-OSS: false)
  double rope_yarn_mscale = 0.0;          // yarn: attention factor mscale (0: unset)
  double rope_yarn_mscale_all_dim = 0.0;  // yarn: attention factor denominator; DeepSeek also
                                          // multiplies the softmax scale by mscale(factor, this)^2
  double rope_attention_factor = 0.0;     // yarn: cos/sin multiplier; 0: derived from the mscales
  bool rope_interleave = false;           // rotate (2i, 2i+1) pairs (DeepSeek) instead of halves
  // Sliding layers get plain RoPE of their own (Gemma 3/4's per-layer-type rope_parameters):
  // rope_local_theta, every pair rotated, neither rope_scaling nor partial_rotary_factor applies.
  bool rope_local_plain = false;

  double norm_eps = 1e-5;
  float norm_weight_offset = 0.0f;  // Gemma stores RMSNorm weights as w - 1 (offset 1)
  bool tie_embeddings = false;
  bool qk_norm = false;              // RMSNorm on q and k per head (Qwen3, Gemma 3)
  bool qk_norm_full_width = false;   // qk_norm over the whole q/k projection instead (OLMoE)
  bool attention_bias = false;       // biases on q/k/v projections (Qwen2), not on o_proj
  float embedding_scale = 1.0f;      // 0: sqrt(d_model) (Gemma); else the multiplier
  bool sandwich_norms = false;       // Gemma 2/3: norms before and after attention and MLP
  float final_logit_softcap = 0.0f;  // Gemma 2: logits = cap * tanh(logits / cap); 0 off
  float attn_logit_softcap = 0.0f;   // Gemma 2 attention softcap; 0 off
  float attention_scale = 0.0f;      // 0: 1/sqrt(head_dim); Gemma uses query_pre_attn_scalar^-0.5

  // Sliding-window attention: layer i is local (window = sliding_window) when
  // sliding_window > 0 and (sliding_window_pattern == 0 or (i + 1) % sliding_window_pattern != 0);
  // pattern 6 gives 5 local : 1 global (Gemma 3); pattern 0 makes every layer local (Mistral).
  int64_t sliding_window = 0;
  int64_t sliding_window_pattern = 0;

  // Mixture of experts (models/moe_layer.h). moe_experts = 0: every layer has the dense MLP.
  int64_t moe_experts = 0;                     // routed experts per MoE layer
  int64_t moe_top_k = 2;                       // experts each token is sent to
  int64_t moe_ffn_dim = 0;                     // hidden width of one expert; 0: ffn_dim
  std::string moe_router_scoring = "softmax";  // softmax | sigmoid (over the router logits)
  bool moe_renormalize = true;                 // combine weights / their sum over the chosen experts
  double moe_routed_scaling = 1.0;             // multiplies the combine weights (DeepSeek's routed_scaling_factor)
  int64_t moe_shared_ffn_dim = 0;              // width of an always-on shared expert; 0: none
  bool moe_shared_gate = false;                // shared output * sigmoid(x . shared_expert_gate) (Qwen2-MoE)
  int64_t moe_first_dense_layers = 0;          // the first N layers stay dense (DeepSeek first_k_dense_replace)
  int64_t moe_layer_step = 1;                  // layer i is MoE when (i + 1) % step == 0 (decoder_sparse_step)
  std::string moe_dense_layers;                // comma-separated layers kept dense (Qwen's mlp_only_layers)
  double moe_aux_loss_coef = 0.001;            // weight of the load-balancing loss in the objective
  double moe_z_loss_coef = 0.0;                // weight of the router z-loss in the objective

  double moe_bias_update_rate = 0.0;    // > 0: a per-expert selection bias (DeepSeek-V3's
                                        // e_score_correction_bias) moved by this rate each step
  int64_t moe_groups = 1;               // group-limited routing: experts in N groups (n_group)
  int64_t moe_topk_groups = 1;          // ... of which the best N are selectable (topk_group)
  int64_t moe_group_score_experts = 2;  // a group's score: the sum of its best N scores (V2: 1 = max)

  // Multi-head latent attention (DeepSeek, models/mla_layer.h); kv_lora_rank > 0 selects it in the
  // families that support it. Per head: queries and keys of qk_nope_head_dim + qk_rope_head_dim,
  // values of v_head_dim.
  int64_t q_lora_rank = 0;  // query compression rank; 0: a full q_proj (V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  // Multi-token prediction (DeepSeek-V3): mtp_layers extra modules after the last layer, each a
  // decoder layer predicting one token further; trained with weight mtp_loss_weight (0: kept, not trained).
  int64_t mtp_layers = 0;
  double mtp_loss_weight = 0.0;

  // Gemma 4 (models/gemma4_layer.h); every one is off (0/false) in the other families.
  int64_t global_head_dim = 0;        // head_dim of the global (full-attention) layers; 0: head_dim
  int64_t global_kv_heads = 0;        // key/value heads of the global layers; 0: n_kv_heads
  bool attention_k_eq_v = false;      // global layers have no v_proj: values are the keys' projection
  bool value_norm = false;            // RMSNorm without a weight on the values, per head
  int64_t kv_shared_layers = 0;       // the last N layers reuse the keys/values of the last earlier
                                      // layer of their type (training and the KV cache alike)
  bool double_wide_mlp = false;       // the KV-sharing layers' MLP is 2 * ffn_dim wide
  int64_t per_layer_input_dim = 0;    // per-layer embeddings (PLE) width per layer; 0: none
  int64_t per_layer_input_vocab = 0;  // rows of the PLE table; 0: vocab_size

  // Linear-attention hybrids (Qwen3-Next, Qwen3.5; models/qwen3_next_layer.h). A layer is
  // linear_attention (a gated delta net: the recurrence of ops/gated_delta_rule behind a causal short
  // convolution) or full_attention, as layer_types lists them, or else every full_attention_interval-th
  // layer full and the others linear (transformers' default list); neither: every layer full.
  std::string layer_types;              // comma-separated, one per layer: linear_attention | full_attention
  int64_t full_attention_interval = 0;  // used when layer_types is empty; 0: no linear-attention layers
  int64_t linear_key_heads = 0;         // key (and query) heads of the gated delta net
  int64_t linear_value_heads = 0;       // value heads, a multiple of linear_key_heads (GQA-style)
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel = 4;      // the short convolution's width over the q/k/v channels
  bool attention_output_gate = false;  // q_proj also yields a gate: attention out * sigmoid(gate) (Qwen3-Next)
  // Mamba-2 (models/mamba2_layer.h; ssm_state_size > 0 only there): the SSD mixer's heads and their
  // width are n_heads and head_dim (n_heads * head_dim: the mixer's inner width, expand * d_model).
  int64_t ssm_state_size = 0;         // N: state columns per head (state_size)
  int64_t ssm_groups = 1;             // groups of B and C (n_groups); n_heads is a multiple
  int64_t ssm_conv_kernel = 4;        // the causal depthwise convolution's width (conv_kernel)
  bool ssm_conv_bias = true;          // the convolution has a bias (use_conv_bias)
  bool ssm_projection_bias = false;   // in_proj and out_proj have biases (use_bias)
  int64_t ssm_chunk_size = 256;       // transformers' chunk of the SSD form (chunk_size): kept for the
                                      // export; the result does not depend on it (lathe's kernel tunes its own)
  double ssm_dt_min = 0.0;            // the step size is clamped to [min, max] (time_step_limit)
  double ssm_dt_max = 0.0;            // 0: no upper limit (transformers' inf)
  double ssm_dt_init_min = 0.001;     // dt_bias starts at softplus^-1 of a step drawn log-uniformly in
  double ssm_dt_init_max = 0.1;       // [min, max], at least floor (time_step_min/max/floor)
  double ssm_dt_init_floor = 1e-4;
  bool residual_in_fp32 = true;       // transformers keeps the residual stream in f32 when the model
                                      // runs in bf16; lathe's residual stream is always f32

  double init_std = 0.02;  // normal(0, init_std) for matrices; norms start at 1 (0 with offset 1)

  int64_t resolved_head_dim() const { return head_dim > 0 ? head_dim : d_model / n_heads; }
  // Layer geometry: global layers may have their own head_dim and key/value heads (Gemma 4).
  int64_t layer_head_dim(int64_t layer) const {
    return global_head_dim > 0 && !layer_is_local(layer) ? global_head_dim : resolved_head_dim();
  }
  int64_t layer_kv_heads(int64_t layer) const {
    return global_kv_heads > 0 && !layer_is_local(layer) ? global_kv_heads : n_kv_heads;
  }
  // The layer whose keys and values layer `layer` attends to: itself, or for one of the last
  // kv_shared_layers layers the last earlier layer of the same type (local/global) that computes
  // its own; -1 when there is none (a config error, see check_kv_sharing).
  int64_t kv_source_layer(int64_t layer) const;
  int64_t rotary_dim() const;
  bool layer_is_local(int64_t layer) const;
  int64_t parameter_count() const;
  // Whether layer `layer` has the mixture-of-experts feed-forward (moe_experts > 0, past the first
  // dense layers, on the layer step, not listed in moe_dense_layers).
  bool layer_is_moe(int64_t layer) const;
  int64_t resolved_moe_ffn_dim() const { return moe_ffn_dim > 0 ? moe_ffn_dim : ffn_dim; }
  bool uses_mla() const { return kv_lora_rank > 0; }
  // Whether layer `layer` is a linear-attention (gated delta net) layer (layer_types above).
  bool layer_is_linear_attention(int64_t layer) const;
  // Parameters one token's forward touches: the routed experts count top_k of moe_experts.
  int64_t active_parameter_count() const;  // total, counting tied embeddings once; throws for an unknown family
  double rope_theta_for_layer(int64_t layer) const {
    return layer_is_local(layer) && rope_local_theta > 0 ? rope_local_theta : rope_theta;
  }

  bool operator==(const ModelConfig&) const = default;
};

const char* to_string(FfnActivation activation);
// ", 6.12M active" for a mixture-of-experts config (the parameters one token reads); "" for a dense one.
std::string active_parameters_note(const ModelConfig& config);
// "0, 3" -> {0, 3}; "" -> {}. lathe::Error naming model.moe_dense_layers for anything else.
std::vector<int64_t> parse_layer_list(const std::string& text);
// "linear_attention,full_attention" -> one type per layer. lathe::Error naming model.layer_types for
// another type or a count other than n_layers.
std::vector<std::string> parse_layer_types(const std::string& text, int64_t n_layers);

}  // namespace lathe
