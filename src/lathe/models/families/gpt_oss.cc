// GPT-OSS (GptOssForCausalLM, transformers 5.x models/gpt_oss/modeling_gpt_oss.py): a pre-norm
// decoder whose every feed-forward is a mixture of experts, with
//   - attention: q/k/v AND o_proj biases, one learned sink logit per query head (self_attn.sinks,
//     autograd/gpt_oss_ops.h attention_with_sinks), GQA;
//   - alternating layers: layer_types defaults to sliding_attention for even layers and
//     full_attention for odd ones (configuration_gpt_oss.py:84-87), which is lathe's
//     sliding_window_pattern 2 (layer i global when (i + 1) % 2 == 0); window 128 by default;
//   - router: a linear WITH bias (mlp.router.weight (E, d), mlp.router.bias (E)); top-k of the
//     logits, softmax over the chosen k (modeling_gpt_oss.py GptOssTopKRouter) = lathe's softmax
//     router with renormalize (exp(l_i) / sum_chosen exp(l_j) either way);
//   - experts with biases and the clamped SwiGLU (alpha 1.702, limit 7; configuration_gpt_oss.py:68-69):
//     y = down_e(clamped_swiglu(gate_up_e(x) + b_gu[e])) + b_down[e].
// Parameter layouts. transformers keeps the experts as x @ W with (E, in, out) weights and gate/up
// INTERLEAVED in the columns (gate j = column 2j, up j = column 2j + 1). lathe keeps its grouped-GEMM
// layout (E, out, in), transposed per expert, under the same names:
//   mlp.experts.gate_up_proj       (E, 2F, d)  row 2j = gate j, row 2j + 1 = up j (HF's columns, transposed)
//   mlp.experts.gate_up_proj_bias  (E, 2F)     interleaved like HF's (identical)
//   mlp.experts.down_proj          (E, d, F)   HF's (E, F, d) transposed
//   mlp.experts.down_proj_bias     (E, d)      identical
// The checkpoint mapping (models/hf/hf_tensor_pieces.h) reads and writes the two weights as transposed
// views, so files and gradients by HF name are in transformers' layout.
// alpha and limit are lathe constants here: an import refuses other swiglu_alpha / swiglu_limit values.
// RoPE: GPT-OSS ships YaRN scaling (ops/rope: factor 32 over 4096 positions, untruncated ramp),
// read from its rope_parameters; a config without them is refused (its class default is YaRN).
// Published checkpoints store the experts in MXFP4 (quantization_config): refused on import.
#include "lathe/autograd/gpt_oss_ops.h"
#include "lathe/models/blocks.h"
#include "lathe/models/layers.h"
#include "lathe/models/moe_layer.h"

namespace lathe {

namespace {

constexpr double kSwigluAlpha = 1.702;  // GptOssConfig.swiglu_alpha default
constexpr double kSwigluLimit = 7.0;    // GptOssConfig.swiglu_limit default

enum GptOssSlot : int {
  kInputNorm,
  kQ,
  kQBias,
  kK,
  kKBias,
  kV,
  kVBias,
  kO,
  kOBias,
  kSinks,
  kPostNorm,
  kRouterWeight,
  kRouterBias,
  kGateUp,
  kGateUpBias,
  kDown,
  kDownBias,
  kGptOssSlotCount
};

std::vector<LayerParameterSpec> gpt_oss_parameters(const ModelConfig& config, int64_t /*layer*/) {
  const int64_t d = config.d_model, head_dim = config.resolved_head_dim();
  const int64_t q_width = config.n_heads * head_dim, kv_width = config.n_kv_heads * head_dim;
  const int64_t experts = config.moe_experts, ffn = config.resolved_moe_ffn_dim();
  LATHE_CHECK(experts > 0, "model.family 'gpt_oss' needs model.moe_experts > 0 (every GPT-OSS layer routes)");
  LATHE_CHECK(config.attention_bias, "model.family 'gpt_oss' needs model.attention_bias=true (its q/k/v/o ",
              "projections have biases; memory estimates and exports read the flag)");
  const double active = static_cast<double>(config.moe_top_k) / static_cast<double>(experts);
  return {
      {kInputNorm, "input_layernorm.weight", ParameterKind::norm, {d}},
      {kQ, "self_attn.q_proj.weight", ParameterKind::matrix, {q_width, d}},
      {kQBias, "self_attn.q_proj.bias", ParameterKind::bias, {q_width}},
      {kK, "self_attn.k_proj.weight", ParameterKind::matrix, {kv_width, d}},
      {kKBias, "self_attn.k_proj.bias", ParameterKind::bias, {kv_width}},
      {kV, "self_attn.v_proj.weight", ParameterKind::matrix, {kv_width, d}},
      {kVBias, "self_attn.v_proj.bias", ParameterKind::bias, {kv_width}},
      {kO, "self_attn.o_proj.weight", ParameterKind::matrix, {d, q_width}},
      {kOBias, "self_attn.o_proj.bias", ParameterKind::bias, {d}},
      {kSinks, "self_attn.sinks", ParameterKind::bias, {config.n_heads}},
      {kPostNorm, "post_attention_layernorm.weight", ParameterKind::norm, {d}},
      {kRouterWeight, "mlp.router.weight", ParameterKind::router, {experts, d}},
      {kRouterBias, "mlp.router.bias", ParameterKind::bias, {experts}},
      {kGateUp, "mlp.experts.gate_up_proj", ParameterKind::matrix, {experts, 2 * ffn, d}, active},
      {kGateUpBias, "mlp.experts.gate_up_proj_bias", ParameterKind::bias, {experts, 2 * ffn}, active},
      {kDown, "mlp.experts.down_proj", ParameterKind::matrix, {experts, d, ffn}, active},
      {kDownBias, "mlp.experts.down_proj_bias", ParameterKind::bias, {experts, d}, active},
  };
}

using autograd::Tape;
using autograd::Var;

// x: (tokens, d_model), normalised -> the routed experts' weighted sum (tokens, d_model).
Var gpt_oss_experts(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& x) {
  const ModelConfig& config = *context.config;
  Var logits = autograd::linear(tape, x, p[kRouterWeight], p[kRouterBias]);
  autograd::RoutedTokens routed =
      autograd::moe_route(tape, logits, Tensor{}, moe_router_options(config), context.router_losses, context.layer);
  autograd::PermutedTokens permuted = autograd::moe_permute(tape, x, routed.expert_ids, config.moe_experts);
  const Tensor& groups = permuted.group_offsets;
  const Tensor experts_of_rows = autograd::row_experts(groups);  // for both bias additions
  Var gate_up = autograd::grouped_linear(tape, permuted.rows, p[kGateUp], groups);
  gate_up = autograd::grouped_add_bias(tape, gate_up, p[kGateUpBias], experts_of_rows);
  Var hidden = autograd::clamped_swiglu(tape, gate_up, kSwigluAlpha, kSwigluLimit);
  Var out = autograd::grouped_linear(tape, hidden, p[kDown], groups);
  out = autograd::grouped_add_bias(tape, out, p[kDownBias], experts_of_rows);
  return autograd::moe_combine(tape, out, routed.weights, permuted.destination);
}

Var gpt_oss_block(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& h) {
  const AttentionWeights attention{&p[kQ],     &p[kK],  &p[kV],  &p[kO],     &p[kQBias], &p[kKBias],
                                   &p[kVBias], nullptr, nullptr, &p[kOBias], &p[kSinks]};
  Var attended = self_attention(tape, context, attention, norm(tape, context, h, p[kInputNorm]));
  Var after_attention = autograd::add(tape, h, attended);
  Var experts = gpt_oss_experts(tape, context, p, norm(tape, context, after_attention, p[kPostNorm]));
  return autograd::add(tape, after_attention, experts);
}

// The standard layer's counts (attention with q/k/v biases, the MoE feed-forward) plus what GPT-OSS
// adds: the o_proj and router bias outputs and the two grouped bias outputs per routed copy.
LayerActivationCounts gpt_oss_activation_counts(const ModelConfig& config, int64_t layer) {
  LayerActivationCounts counts = decoder_activation_counts(config, layer);
  counts.save_all +=
      config.d_model + config.moe_experts + config.moe_top_k * (2 * config.resolved_moe_ffn_dim() + config.d_model);
  return counts;
}

const HfMoe kGptOssMoe = {
    .experts_key = "num_local_experts",
    .experts_alias_key = "num_experts",
    .default_experts = 128,  // configuration_gpt_oss.py:52
    .default_top_k = 4,      // :67
    .expert_ffn_key = "intermediate_size",
    .default_expert_ffn = 2880,
    .renormalize_key = nullptr,  // softmax over the chosen k: always renormalised
    .default_renormalize = true,
    .default_aux_loss_coef = 0.001,
    .sparse_step_keys = false,
    .default_shared_ffn = 0,
    .qkv_bias_key = "attention_bias",  // must be true (default true): lathe's layer always has the biases
    .checkpoint_block = "mlp",
    .gate_proj = "",
    .up_proj = "",
    .down_proj = "",
    .transposed_stacked_experts = true,
};

}  // namespace

const FamilySpec& gpt_oss_family() {
  static const FamilySpec spec = {
      .name = "gpt_oss",
      .hf = {.architecture = "GptOssForCausalLM",
             .model_type = "gpt_oss",
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::fixed_pattern,
             .legacy_pattern = 2,
             .export_false_keys = {},
             .moe = &kGptOssMoe,
             .default_kv_heads = 8,
             .default_norm_eps = 1e-5,
             .default_rope_theta = 150000.0,
             .default_sliding_window = 128,  // configuration_gpt_oss.py:59
             .fixed_numbers = {{"swiglu_alpha", kSwigluAlpha}, {"swiglu_limit", kSwigluLimit}},
             .default_rope_type = "yarn"},
      .traits = {.attention_bias = true},
      .default_chat_template = "plain",
      .layer =
          {
              .parameters = gpt_oss_parameters,
              .slot_count = kGptOssSlotCount,
              .block = gpt_oss_block,
              .activation_counts = gpt_oss_activation_counts,
              .attention_training_flops_per_token = causal_attention_training_flops_per_token,
              .make_kv_cache = make_decoder_kv_cache,
          },
      .trains_on_gpu = true,
  };
  return spec;
}

}  // namespace lathe
