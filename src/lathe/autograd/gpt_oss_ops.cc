#include "lathe/autograd/gpt_oss_ops.h"

#include <vector>

#include "lathe/autograd/ops.h"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/attention_sinks/attention_sinks.h"
#include "lathe/ops/clamped_swiglu/clamped_swiglu.h"

namespace lathe::autograd {
namespace {

bool fast(const Tape& tape) { return tape.precision() == Precision::fast; }

}  // namespace

Tensor row_experts(const Tensor& group_offsets) {
  const Tensor offsets = on_host(group_offsets);
  const int64_t experts = offsets.numel() - 1;
  const int64_t* offset = offsets.ptr<int64_t>();
  Tensor ids = Tensor::empty({offset[experts]}, DType::i32);
  int32_t* id = ids.ptr<int32_t>();
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t row = offset[e]; row < offset[e + 1]; ++row) id[row] = static_cast<int32_t>(e);
  return on_device(group_offsets.view().device, ids);
}

Var attention_with_sinks(Tape& tape, const Var& q, const Var& k, const Var& v, const Var& sinks,
                         const FlashAttentionOptions& options) {
  const int64_t batch = q->value.dim(0), seq_q = q->value.dim(1), heads = q->value.dim(2);
  LATHE_ASSERT(sinks->value.shape() == Shape({heads}) && sinks->value.dtype() == tape.dtype());
  const Shape o_shape = {batch, seq_q, heads, v->value.dim(3)}, lse_shape = {batch, heads, seq_q};
  Var out = make_var(empty_beside(q->value, o_shape, tape.dtype()),
                     q->requires_grad || k->requires_grad || v->requires_grad || sinks->requires_grad);
  // Attention over the visible keys (o, lse), then the sinks folded in: out and lse' (kept for the backward).
  const Tensor o = empty_beside(q->value, o_shape, tape.dtype()),
               raw_lse = empty_beside(q->value, lse_shape, tape.dtype());
  const Tensor lse = empty_beside(q->value, lse_shape, tape.dtype());
  const FlashAttentionArgs args{q->value, k->value, v->value, o, raw_lse, options};
  const AttentionSinksArgs fold{o, raw_lse, sinks->value, out->value, lse};
  if (fast(tape)) {
    flash_attention(args);
    attention_sinks(fold);
  } else {
    flash_attention_reference<double>(args);
    attention_sinks_reference<double>(fold);
  }
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([q, k, v, sinks, out, lse, options, precision] {
    Tensor dq = empty_like(q->value), dk = empty_like(k->value), dv = empty_like(v->value);
    // The flash backward with (out, lse') is exact for q, k and v (gpt_oss_ops.h).
    FlashAttentionBackwardArgs args{q->value, k->value, v->value, out->value, lse, out->grad, dq, dk, dv, options};
    const bool is_fast = precision == Precision::fast;
    is_fast ? flash_attention_backward(args) : flash_attention_backward_reference<double>(args);
    if (sinks->requires_grad) {
      Tensor d_sinks = empty_like(sinks->value);
      const AttentionSinksBackwardArgs sink_args{out->value, out->grad, lse, sinks->value, d_sinks};
      is_fast ? attention_sinks_backward(sink_args) : attention_sinks_backward_reference<double>(sink_args);
      accumulate_grad(sinks, d_sinks, true);
    }
    accumulate_grad(q, dq, true);
    accumulate_grad(k, dk, true);
    accumulate_grad(v, dv, true);
  });
  return out;
}

Var clamped_swiglu(Tape& tape, const Var& gate_up, double alpha, double limit) {
  const Shape& shape = gate_up->value.shape();
  LATHE_ASSERT(shape.rank() == 2 && shape[1] % 2 == 0);
  Var out = make_var(empty_beside(gate_up->value, {shape[0], shape[1] / 2}, tape.dtype()), gate_up->requires_grad);
  const ClampedSwigluArgs args{gate_up->value, out->value, alpha, limit};
  fast(tape) ? lathe::clamped_swiglu(args) : clamped_swiglu_reference<double>(args);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([gate_up, out, alpha, limit, precision] {
    Tensor grad = empty_like(gate_up->value);
    const ClampedSwigluBackwardArgs args{gate_up->value, out->grad, grad, alpha, limit};
    precision == Precision::fast ? clamped_swiglu_backward(args) : clamped_swiglu_backward_reference<double>(args);
    accumulate_grad(gate_up, grad, true);
  });
  return out;
}

Var grouped_add_bias(Tape& tape, const Var& x, const Var& bias, const Tensor& row_experts) {
  const Shape& shape = x->value.shape();
  LATHE_ASSERT(shape.rank() == 2 && bias->value.shape().rank() == 2 && bias->value.dim(1) == shape[1]);
  LATHE_ASSERT(row_experts.dtype() == DType::i32 && row_experts.numel() == shape[0]);
  // Each row's expert bias gathered as an embedding lookup (its gradient: the rows' gradients
  // summed per expert, in row order), then added.
  return add(tape, x, embedding(tape, bias, row_experts, 1.0f));
}

}  // namespace lathe::autograd
