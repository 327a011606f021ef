// The differentiable ops Gemma 4 adds to the standard decoder (models/gemma4_layer.h), in the style
// of autograd/ops.h: a float and a double path (the tape's precision picks), each recording its own
// backward. The float path runs library ops on the tensors' device (scale: the add op without its
// first operand; scale_by_expert: moe_expert_scale), the double path plain loops on the host.
// Shapes and math follow transformers 5.x models/gemma4/modeling_gemma4.py.
#pragma once

#include "lathe/autograd/tape.h"

namespace lathe::autograd {

// x: any shape -> x * factor (a constant: Gemma 4's hidden_size^-0.5 and 2^-0.5 multipliers of
// the per-layer embeddings and the router input, and the per-layer layer_scalar buffer, which
// transformers never trains). dx = factor * dy.
Var scale(Tape& tape, const Var& x, float factor);

// weights: (tokens, top_k); expert_scale: (experts); expert_ids: (tokens, top_k) i32 ->
// weights[t, j] * expert_scale[expert_ids[t, j]] (Gemma4TextRouter's per_expert_scale on the
// renormalised top-k weights). d weights = dy * expert_scale[ids]; d expert_scale[e] = the sum of
// dy * weights over the slots routed to e.
Var scale_by_expert(Tape& tape, const Var& weights, const Var& expert_scale, const Tensor& expert_ids);

}  // namespace lathe::autograd
