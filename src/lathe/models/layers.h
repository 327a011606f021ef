// The layers every decoder family shares, built only from autograd ops (which run the kernel
// library). A family (models/llama.cc, models/gemma.cc) wires them into its block; these
// functions never look at the family name.
#pragma once

#include <string>

#include "lathe/autograd/ops.h"
#include "lathe/models/kv_cache.h"
#include "lathe/models/model_config.h"

namespace lathe {

// The weights of one decoder layer (HF names in model_config.h). Absent weights are null.
struct LayerWeights {
  autograd::Var q_proj, k_proj, v_proj, o_proj;       // (out, in)
  autograd::Var q_bias, k_bias, v_bias;               // (out), attention_bias only
  autograd::Var q_norm, k_norm;                       // (head_dim), qk_norm only
  autograd::Var gate_proj, up_proj, down_proj;        // (ffn, d), (ffn, d), (d, ffn)
  autograd::Var norm[4];                              // the family's norms in its own order (d_model)
};

// Where a block runs: the layer, the batch layout of its (batch * seq, d_model) rows, and for
// inference the KV cache and the position of the first token.
struct BlockContext {
  const ModelConfig* config = nullptr;
  int64_t layer = 0;
  int64_t batch = 0, seq = 0;
  int64_t position_offset = 0;   // tokens already in the cache
  KvCache* cache = nullptr;      // inference only; attention then reads the cached keys/values
};

// x: (rows, d_model) -> RMSNorm with the model's eps and weight offset.
autograd::Var norm(autograd::Tape& tape, const BlockContext& context, const autograd::Var& x,
                   const autograd::Var& weight);
// x: (batch * seq, d_model), already normalised -> the attention output projected back to d_model:
// q/k/v projections, optional per-head q/k RMSNorm, RoPE, causal (optionally sliding-window, soft-
// capped) GQA flash attention, output projection.
autograd::Var self_attention(autograd::Tape& tape, const BlockContext& context, const LayerWeights& weights,
                             const autograd::Var& x);
// x: (rows, d_model), already normalised -> down(act(gate(x)) * up(x)).
autograd::Var gated_mlp(autograd::Tape& tape, const BlockContext& context, const LayerWeights& weights,
                        const autograd::Var& x);

}  // namespace lathe
