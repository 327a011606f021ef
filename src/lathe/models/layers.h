// The layers every decoder family shares, built only from autograd ops (which run the kernel
// library). A family's block (models/families/, models/blocks.h) wires them together; these
// functions never look at the family name.
#pragma once

#include <string>

#include "lathe/autograd/ops.h"
#include "lathe/models/family_spec.h"

namespace lathe {

// The weights self_attention reads (HF names in model_config.h); an absent weight is a null pointer
// or points to a null Var (an unused slot of the layer's LayerParameters).
struct AttentionWeights {
  const autograd::Var* q_proj;            // (n_heads * head_dim, d_model)
  const autograd::Var* k_proj;            // (n_kv_heads * head_dim, d_model)
  const autograd::Var* v_proj;            // (n_kv_heads * head_dim, d_model)
  const autograd::Var* o_proj;            // (d_model, n_heads * head_dim)
  const autograd::Var* q_bias;            // (n_heads * head_dim), attention_bias only
  const autograd::Var* k_bias;            // (n_kv_heads * head_dim), attention_bias only
  const autograd::Var* v_bias;            // (n_kv_heads * head_dim), attention_bias only
  const autograd::Var* q_norm;            // (head_dim), qk_norm only
  const autograd::Var* k_norm;            // (head_dim), qk_norm only
  const autograd::Var* o_bias = nullptr;  // (d_model): an o_proj bias (GPT-OSS)
  const autograd::Var* sinks = nullptr;   // (n_heads): per-head attention sink logits (GPT-OSS,
                                          // autograd/gpt_oss_ops.h attention_with_sinks)
};

// The weights gated_mlp reads.
struct MlpWeights {
  const autograd::Var* gate_proj;  // (ffn_dim, d_model)
  const autograd::Var* up_proj;    // (ffn_dim, d_model)
  const autograd::Var* down_proj;  // (d_model, ffn_dim)
};

// The RoPE of layer `layer` (theta, scaling, layout; the MLA rope width for latent attention).
RopeParams rope_params(const ModelConfig& config, int64_t layer, int64_t position_offset);
// x: (rows, d_model) -> RMSNorm with the model's eps and weight offset. output bf16: a bf16 value
// for bf16 products only (autograd::rms_norm); the caller knows every reader is one.
autograd::Var norm(autograd::Tape& tape, const BlockContext& context, const autograd::Var& x,
                   const autograd::Var& weight, DType output = DType::f32);
// bf16 where every weight carries a bf16 copy (bf16 training: products that all multiply in bf16
// can take a bf16 input written by the op before them), f32 otherwise (or where one is absent).
DType products_input_dtype(std::initializer_list<const autograd::Var*> weights);
// x: (batch, seq, heads, head_dim) -> RMSNorm of every head with weight (head_dim).
autograd::Var head_norm(autograd::Tape& tape, const BlockContext& context, const autograd::Var& x,
                        const autograd::Var& weight);
// x: (batch * seq, d_model), already normalised -> the attention output projected back to d_model:
// q/k/v projections, optional per-head q/k RMSNorm, RoPE, causal (optionally sliding-window, soft-
// capped) GQA flash attention (with per-head sinks when weights.sinks is set), output projection
// (plus its bias when weights.o_bias is set).
autograd::Var self_attention(autograd::Tape& tape, const BlockContext& context, const AttentionWeights& weights,
                             const autograd::Var& x);
// x: (rows, d_model), already normalised -> down(act(gate(x)) * up(x)).
autograd::Var gated_mlp(autograd::Tape& tape, const BlockContext& context, const MlpWeights& weights,
                        const autograd::Var& x);

}  // namespace lathe
