#include "lathe/models/deepseek_layer.h"

#include "lathe/models/layers.h"

namespace lathe {

using autograd::Tape;
using autograd::Var;

std::vector<LayerParameterSpec> deepseek_layer_parameters(const ModelConfig& config, int64_t layer) {
  LATHE_CHECK(config.uses_mla(), "model.family '", config.family,
              "' needs multi-head latent attention: model.kv_lora_rank > 0 (and qk_rope_head_dim, v_head_dim)");
  const int64_t d = config.d_model, heads = config.n_heads;
  const int64_t qk = heads * (config.qk_nope_head_dim + config.qk_rope_head_dim);
  const int64_t rank = config.kv_lora_rank, q_rank = config.q_lora_rank;
  std::vector<LayerParameterSpec> parameters = {{kNorm0, "input_layernorm.weight", ParameterKind::norm, {d}}};
  if (q_rank > 0) {
    parameters.push_back({kQAProj, "self_attn.q_a_proj.weight", ParameterKind::matrix, {q_rank, d}});
    parameters.push_back({kQANorm, "self_attn.q_a_layernorm.weight", ParameterKind::norm, {q_rank}});
    parameters.push_back({kQBProj, "self_attn.q_b_proj.weight", ParameterKind::matrix, {qk, q_rank}});
  } else {
    parameters.push_back({kQProj, "self_attn.q_proj.weight", ParameterKind::matrix, {qk, d}});
  }
  parameters.push_back(
      {kKvAProj, "self_attn.kv_a_proj_with_mqa.weight", ParameterKind::matrix, {rank + config.qk_rope_head_dim, d}});
  parameters.push_back({kKvANorm, "self_attn.kv_a_layernorm.weight", ParameterKind::norm, {rank}});
  parameters.push_back({kKvBProj,
                        "self_attn.kv_b_proj.weight",
                        ParameterKind::matrix,
                        {heads * (config.qk_nope_head_dim + config.v_head_dim), rank}});
  parameters.push_back({kOProj, "self_attn.o_proj.weight", ParameterKind::matrix, {d, heads * config.v_head_dim}});
  parameters.push_back({kNorm1, "post_attention_layernorm.weight", ParameterKind::norm, {d}});
  add_feed_forward_parameters(config, layer, "mlp.shared_experts", parameters);
  return parameters;
}

Var deepseek_block(Tape& tape, const BlockContext& context, const LayerParameters& p, const Var& h) {
  const MlaWeights attention{&p[kQProj],   &p[kQAProj],  &p[kQANorm],  &p[kQBProj],
                             &p[kKvAProj], &p[kKvANorm], &p[kKvBProj], &p[kOProj]};
  Var attended = mla_attention(tape, context, attention, norm(tape, context, h, p[kNorm0]));
  Var after_attention = autograd::add(tape, h, attended);
  Var mlp_out = feed_forward(tape, context, p, norm(tape, context, after_attention, p[kNorm1]));
  return autograd::add(tape, after_attention, mlp_out);
}

LayerActivationCounts deepseek_activation_counts(const ModelConfig& config, int64_t layer) {
  const LayerActivationCounts attention = mla_activation_counts(config), ffn = feed_forward_counts(config, layer);
  const int64_t d = config.d_model;
  // two norm outputs (+ inv_rms) and two residual adds beside the attention and feed-forward
  return {attention.save_all + ffn.save_all + 2 * d + 2 + 2 * d, attention.matmul_outputs + ffn.matmul_outputs};
}

FamilySpec deepseek_family_spec(const char* name, const char* architecture, const char* model_type, const HfMoe* moe,
                                const HfDeepseek* deepseek, std::vector<const char*> export_false_keys,
                                int64_t default_max_position) {
  return {
      .name = name,
      .hf = {.architecture = architecture,
             .model_type = model_type,
             .default_tie_embeddings = false,
             .activation_key = "hidden_act",
             .default_activation = "silu",
             .sliding_window = HfSlidingWindow::none,
             .export_false_keys = std::move(export_false_keys),
             .moe = moe,
             .deepseek = deepseek,
             .default_max_position = default_max_position},
      .traits = {},
      .default_chat_template = "plain",
      .layer = kDeepseekLayer,
      .trains_on_gpu = true,
  };
}

}  // namespace lathe
