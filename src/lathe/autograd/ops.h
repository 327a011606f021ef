// Differentiable ops: each runs a kernel-library op forward (or its float64 reference, per the
// tape's precision) and records that op's own backward kernel. Shapes follow the library ops;
// every tensor here is contiguous row-major.
#pragma once

#include "lathe/autograd/tape.h"
#include "lathe/ops/flash_attention/flash_attention.h"
#include "lathe/ops/gated_activation/gated_activation.h"
#include "lathe/ops/rope/rope.h"

namespace lathe::autograd {

// table: (vocab, dim); ids: (tokens) i32 -> (tokens, dim) = table[ids] * scale.
Var embedding(Tape& tape, const Var& table, const Tensor& ids, float scale);
// x: (rows, dim); weight: (dim) -> (rows, dim) RMS-normalised (see ops/rms_norm).
// output bf16 (fast precision, bf16 training; tape.h): the result is a bf16 value, so every reader
// must be a bf16 product (the caller knows its readers); the gradient arriving is f32.
Var rms_norm(Tape& tape, const Var& x, const Var& weight, float eps, float weight_offset, DType output = DType::f32);
// x: (rows, in); weight: (out, in) as in torch.nn.Linear -> (rows, out) = x @ weight^T.
// Under a recording MatmulStash the output is kept for replay instead of being recomputed.
// When weight carries a bf16 copy (tape.h), x and the output gradient are rounded to bf16 and
// all three products run in bf16 with f32 accumulation; gradients stay f32.
// With a bias (out), it is added in the product's epilogue (the same bits as add_bias after it)
// and its gradient is the column_sums op on the output gradient (f64, rows in order), so the whole
// layer runs on the GPU too.
Var linear(Tape& tape, const Var& x, const Var& weight, const Var& bias = nullptr);
// x: (batch, seq, heads, head_dim) -> rotated copy (positions 0..seq-1 + params.position_offset).
Var rope(Tape& tape, const Var& x, const RopeParams& params);
// q: (batch, seq_q, heads, head_dim); k: (batch, seq_k, kv_heads, head_dim); v: (batch, seq_k, kv_heads,
// v_head_dim) -> (batch, seq_q, heads, v_head_dim).
// compute bf16 (fast precision only; a bf16 run where AMX is active, TransformerModel's
// attention_dtype): q, k and v are rounded to bf16 and the kernels run on them (AMX tiles), o is
// rounded to bf16 and widened; the backward rounds the output gradient and widens dq, dk, dv into
// the f32 gradients. f32: the tape's own precision throughout.
// output bf16 (with compute bf16; tape.h): o is not widened; the result is a bf16 value (its
// gradient f32), for a caller whose only reader is a bf16 linear (the o projection).
Var attention(Tape& tape, const Var& q, const Var& k, const Var& v, const FlashAttentionOptions& options,
              DType compute = DType::f32, DType output = DType::f32);
// gate, up: (rows, ffn) -> act(gate) * up.
// output bf16 (fast precision, bf16 training; tape.h): the result is a bf16 value, read only by a
// bf16 linear, and gate and up receive bf16 gradients, so they must be outputs of bf16 linears
// (which read those as they are). The same bits as rounding the f32 results: no extra pass over
// them, and half the bytes written.
Var gated_activation(Tape& tape, const Var& gate, const Var& up, GatedActivation activation, DType output = DType::f32);
// a, b: the same shape -> a + b.
Var add(Tape& tape, const Var& a, const Var& b);
// x: (rows, dim); bias: (dim) -> x + bias on every row (Qwen2's q/k/v projection biases). The bias
// gradient is the output gradient summed over rows.
Var add_bias(Tape& tape, const Var& x, const Var& bias);
// The same values with another shape (shares storage; gradients reshaped back).
Var reshape(Tape& tape, const Var& x, const Shape& shape);

struct CrossEntropyOptions {
  float softcap = 0.0f;     // final-logit soft cap (Gemma 2); 0 off
  float grad_scale = 1.0f;  // multiplies the gradients (1 / micro-batches), not the loss
};
// hidden: (tokens, d_model); weight: (vocab, d_model); targets: (tokens) i32 -> loss (1), the mean
// cross-entropy of softcap(hidden @ weight^T). The fused kernel computes the gradients during the
// forward (the logits are never stored); backward hands them on. backward() must be seeded with 1.
// When weight carries a bf16 copy, hidden is rounded to bf16 and the logits GEMMs run in bf16.
Var cross_entropy(Tape& tape, const Var& hidden, const Var& weight, const Tensor& targets,
                  const CrossEntropyOptions& options);

}  // namespace lathe::autograd
