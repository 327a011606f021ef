// GPT-OSS's attention sinks (transformers' modeling_gpt_oss.py:255-262): one learned logit per query
// head that takes probability mass and carries no value. Applied to flash attention's result over
// the visible keys (o and its log-sum-exp lse), per (batch, head, query):
//   lse_out = logaddexp(lse, sinks[h]),   o_out = o * exp(lse - lse_out)
// (a query that sees no key, lse = -inf, gets o_out = 0 and lse_out = sinks[h]). Backward, given
// the forward's o_out and lse_out and the gradient d_o of o_out:
//   d_sinks[h] = -sum over (batch, query) of exp(sinks[h] - lse_out) * sum_d d_o * o_out
// (q, k and v's gradients are flash attention's backward run with o_out and lse_out:
// autograd/gpt_oss_ops.h).
// o, o_out, d_o: (batch, seq, heads, v_dim) f32; lse, lse_out: (batch, heads, seq) f32; sinks,
// d_sinks: (heads) f32; all contiguous.
// Errors (lathe::Error): wrong rank, shape or dtype, a non-contiguous tensor.
// Determinism: the forward is per row; the backward's per-row terms are summed per head in f64 in
// (batch, query) order, then rounded: the same bits for every thread count.
// On the GPU: attention_sinks_cuda.h ("cuda_emulated" runs its kernels on the host).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct AttentionSinksArgs {
  TensorView o;        // (batch, seq, heads, v_dim) f32
  TensorView lse;      // (batch, heads, seq) f32
  TensorView sinks;    // (heads) f32
  TensorView o_out;    // (batch, seq, heads, v_dim) f32 output
  TensorView lse_out;  // (batch, heads, seq) f32 output
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(o), visit(lse), visit(sinks), visit(o_out), visit(lse_out);
  }
};

struct AttentionSinksBackwardArgs {
  TensorView o;        // the forward's o_out
  TensorView d_o;      // its gradient, (batch, seq, heads, v_dim) f32
  TensorView lse;      // the forward's lse_out
  TensorView sinks;    // (heads) f32
  TensorView d_sinks;  // (heads) f32 output
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(o), visit(d_o), visit(lse), visit(sinks), visit(d_sinks);
  }
};

// No tunable parameter.
struct AttentionSinksConfig {
  template <class Visit>
  void visit(Visit&&) {}
};

void attention_sinks(const AttentionSinksArgs& args, const Dispatch& dispatch = {});
void attention_sinks_backward(const AttentionSinksBackwardArgs& args, const Dispatch& dispatch = {});
void validate(const AttentionSinksArgs& args);
void validate(const AttentionSinksBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline).
template <class T>
void attention_sinks_reference(const AttentionSinksArgs& args);
template <class T>
void attention_sinks_backward_reference(const AttentionSinksBackwardArgs& args);

OpCost attention_sinks_cost(const AttentionSinksArgs& args);
OpCost attention_sinks_backward_cost(const AttentionSinksBackwardArgs& args);
const Op<AttentionSinksArgs, AttentionSinksConfig>& attention_sinks_op();
const Op<AttentionSinksBackwardArgs, AttentionSinksConfig>& attention_sinks_backward_op();

}  // namespace lathe
