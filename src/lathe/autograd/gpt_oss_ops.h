// The differentiable ops GPT-OSS adds to the standard decoder (models/families/gpt_oss.cc), in the
// style of autograd/ops.h: the ops (fast precision, on the host or the GPU) or their float64
// references (the tape's precision picks), each recording its own backward. attention_with_sinks
// runs the flash-attention op unchanged and folds the sinks in with the attention_sinks op (below);
// clamped_swiglu is the clamped_swiglu op; grouped_add_bias gathers each row's expert bias as an
// embedding lookup and adds it.
//
// Shapes and math follow transformers 5.x models/gpt_oss/modeling_gpt_oss.py (cited by line).
#pragma once

#include "lathe/autograd/tape.h"
#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe::autograd {

// Attention with one learned "sink" logit per query head (modeling_gpt_oss.py:255-262, eager_attention_forward):
// each query's softmax runs over its visible scores plus sinks[h], and the sink takes probability mass but
// carries no value. With the flash op's o and lse (log-sum-exp over the visible keys):
//   lse' = logaddexp(lse, sink_h),  o' = o * exp(lse - lse')
// The standard flash backward run with (o', lse') is then exact for q, k and v (p' = exp(s - lse') are the
// true probabilities, and D = rowsum(do * o') = sum_j p'_j dp_j since the sink has no value), and
//   d sink_h = -sum over (batch, query) of exp(sink_h - lse') * rowsum(do * o').
// q: (batch, seq_q, heads, head_dim); k: (batch, seq_k, kv_heads, head_dim); v: (batch, seq_k, kv_heads,
// v_head_dim); sinks: (heads) -> (batch, seq_q, heads, v_head_dim).
// A query with no visible key gets o' = 0.
Var attention_with_sinks(Tape& tape, const Var& q, const Var& k, const Var& v, const Var& sinks,
                         const FlashAttentionOptions& options);

// GPT-OSS's clamped SwiGLU (modeling_gpt_oss.py:69-75, GptOssExperts._apply_gate) on INTERLEAVED columns:
// gate_up: (rows, 2 * ffn) with gate j in column 2j and up j in column 2j + 1 (transformers' layout) ->
//   g = min(gate, limit), u = clamp(up, -limit, limit), out = (u + 1) * g * sigmoid(alpha * g)   (rows, ffn)
// The clamps pass no gradient outside [.., limit] and [-limit, limit] (torch.clamp: bounds inclusive).
Var clamped_swiglu(Tape& tape, const Var& gate_up, double alpha, double limit);

// group_offsets (experts + 1) i64, rows grouped by expert -> (rows) i32, each row's expert, on
// group_offsets' device (the offsets are read on the host: one copy from a GPU). A layer computes
// it once for both of its grouped_add_bias calls.
Tensor row_experts(const Tensor& group_offsets);

// x: (rows, out); row_experts: (rows) i32, each row's expert (row_experts above); bias: (experts,
// out) -> x + bias[row_experts[r]] on every row r (GPT-OSS's per-expert gate_up_proj_bias and
// down_proj_bias). The bias gradient of expert e is the output gradient summed over e's rows.
Var grouped_add_bias(Tape& tape, const Var& x, const Var& bias, const Tensor& row_experts);

}  // namespace lathe::autograd
