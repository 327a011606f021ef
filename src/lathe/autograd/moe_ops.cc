#include "lathe/autograd/moe_ops.h"

#include <cmath>
#include <vector>

#include "lathe/device/device_tensor.h"
#include "lathe/ops/grouped_matmul/grouped_matmul.h"
#include "lathe/ops/moe_combine/moe_combine.h"
#include "lathe/ops/moe_permute/moe_permute.h"

namespace lathe::autograd {
namespace {

bool fast(Precision precision) { return precision == Precision::fast; }

// A tensor of the tape's dtype on `like`'s device (host, or the GPU with train.device=cuda).
Tensor new_tensor(const Tape& tape, const Tensor& like, const Shape& shape) {
  return empty_beside(like, shape, tape.dtype());
}

// dst += src, elementwise, both contiguous of one float dtype.
void add_into(Precision precision, const TensorView& dst, const TensorView& src) {
  add_tensors(precision, dst, src, dst);
}

}  // namespace

RoutedTokens moe_route(Tape& tape, const Var& logits, const Tensor& selection_bias, const MoeRouterOptions& options,
                       const std::shared_ptr<RouterLosses>& losses, int64_t loss_index) {
  const int64_t tokens = logits->value.dim(0), experts = logits->value.dim(1), k = options.top_k;
  RoutedTokens routed;
  routed.weights = make_var(new_tensor(tape, logits->value, {tokens, k}), logits->requires_grad);
  routed.expert_ids = empty_beside(logits->value, {tokens, k}, DType::i32);
  routed.probs = new_tensor(tape, logits->value, {tokens, experts});
  MoeRouterArgs args{logits->value,         selection_bias.defined() ? selection_bias.view() : TensorView{},
                     routed.probs,          routed.expert_ids,
                     routed.weights->value, options};
  fast(tape.precision()) ? moe_router(args) : moe_router_reference<double>(args);
  if (losses) losses->record(loss_index, logits->value, routed.probs, routed.expert_ids);
  if (!tape.recording() || !routed.weights->requires_grad) return routed;
  const Precision precision = tape.precision();
  tape.record([logits, weights = routed.weights, ids = routed.expert_ids, probs = routed.probs, options, losses,
               loss_index, precision] {
    LATHE_ASSERT(!losses || losses->finished());
    Tensor d_weights = weights->grad;
    if (!d_weights.defined()) {  // nothing downstream used the weights: only the losses' gradients
      d_weights = zeros_on(weights->value.view().device, weights->value.shape(), weights->value.dtype());
    }
    Tensor d_logits = empty_like(logits->value);
    MoeRouterBackwardArgs args{probs,    ids,    d_weights, losses ? losses->d_probs(loss_index) : TensorView{},
                               d_logits, options};
    fast(precision) ? moe_router_backward(args) : moe_router_backward_reference<double>(args);
    if (losses && losses->d_logits(loss_index).data) add_into(precision, d_logits, losses->d_logits(loss_index));
    accumulate_grad(logits, d_logits, true);
  });
  return routed;
}

PermutedTokens moe_permute(Tape& tape, const Var& x, const Tensor& expert_ids, int64_t n_experts, DType rows) {
  const int64_t tokens = x->value.dim(0), d = x->value.dim(1), k = expert_ids.dim(1);
  const bool bf16 = rows == DType::bf16;
  LATHE_ASSERT(!bf16 || fast(tape.precision()));
  PermutedTokens permuted;
  permuted.rows = make_var(output_beside(x->value, {tokens * k, d}, rows), x->requires_grad);
  permuted.group_offsets = empty_beside(x->value, {n_experts + 1}, DType::i64);
  permuted.destination = empty_beside(x->value, {tokens * k}, DType::i32);
  Tensor source = empty_beside(x->value, {tokens * k}, DType::i32);
  const Tensor& input = bf16 ? bf16_value(x) : x->value;
  MoePermuteArgs args{input,  expert_ids,          n_experts, permuted.rows->value, permuted.group_offsets,
                      source, permuted.destination};
  fast(tape.precision()) ? lathe::moe_permute(args) : moe_permute_reference<double>(args);
  if (!tape.recording() || !x->requires_grad) return permuted;
  const Precision precision = tape.precision();
  tape.record([x, rows = permuted.rows, destination = permuted.destination, k, precision] {
    // Summed straight into x's gradient (the shared expert and the router also read x).
    MoePermuteBackwardArgs args{rows->grad, destination, k, {}, false};
    args.dx = grad_buffer(x, x->value.dtype(), &args.accumulate);
    fast(precision) ? moe_permute_backward(args) : moe_permute_backward_reference<double>(args);
  });
  return permuted;
}

Var grouped_linear(Tape& tape, const Var& x, const Var& weight, const Tensor& group_offsets) {
  const int64_t rows = x->value.dim(0), out_features = weight->value.dim(1);
  const bool bf16 = weight->value_bf16.defined();
  LATHE_ASSERT(!bf16 || tape.precision() == Precision::fast);
  LATHE_ASSERT(bf16 || x->value.dtype() != DType::bf16);  // a bf16 activation feeds bf16 matmuls only
  Var out = stashed_matmul_output(tape, x->requires_grad || weight->requires_grad, [&] {
    Tensor product = new_tensor(tape, x->value, {rows, out_features});
    GroupedMatmulArgs args{bf16 ? bf16_value(x) : x->value, bf16 ? weight->value_bf16 : weight->value, group_offsets,
                           product, false};
    fast(tape.precision()) ? grouped_matmul(args) : grouped_matmul_reference<double>(args);
    return product;
  });
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([x, weight, out, group_offsets, precision, bf16] {
    // bf16: the output gradient is rounded once (or handed over in bf16, as gated_activation_fused
    // does); both products read bf16 operands (as linear).
    LATHE_ASSERT(bf16 || out->grad.dtype() != DType::bf16);
    const Tensor grad = bf16 && out->grad.dtype() != DType::bf16 ? converted(out->grad, DType::bf16) : out->grad;
    GroupedMatmulBackwardArgs args;
    args.x = bf16 ? bf16_value(x) : x->value;
    args.w = bf16 ? weight->value_bf16 : weight->value;
    args.group_offsets = group_offsets;
    args.dy = grad;
    Tensor dx;
    if (x->requires_grad) {
      dx = empty_beside(x->value, x->value.shape(), grad_dtype(x));
      args.dx = dx;
    }
    if (weight->requires_grad) args.dw = grad_buffer(weight, weight->value.dtype(), &args.accumulate_dw);
    fast(precision) ? grouped_matmul_backward(args) : grouped_matmul_backward_reference<double>(args);
    if (dx.defined()) accumulate_grad(x, dx, true);
  });
  return out;
}

Var gated_activation_fused(Tape& tape, const Var& gate_up, GatedActivation activation, DType output) {
  const int64_t rows = gate_up->value.dim(0), ffn = gate_up->value.dim(1) / 2;
  LATHE_ASSERT(gate_up->value.dim(1) == 2 * ffn);
  LATHE_ASSERT(output != DType::bf16 || fast(tape.precision()));
  Var out = make_var(output_beside(gate_up->value, {rows, ffn}, output), gate_up->requires_grad);
  const TensorView whole = gate_up->value.view();
  GatedActivationArgs args{whole.slice(1, 0, ffn), whole.slice(1, ffn, 2 * ffn), out->value, activation};
  fast(tape.precision()) ? lathe::gated_activation(args) : gated_activation_reference<double>(args);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([gate_up, out, ffn, activation, precision, output] {
    Tensor d_gate_up = output_beside(gate_up->value, gate_up->value.shape(), output);
    const TensorView value = gate_up->value.view(), grad = d_gate_up.view();
    GatedActivationBackwardArgs args{value.slice(1, 0, ffn), value.slice(1, ffn, 2 * ffn), out->grad,
                                     grad.slice(1, 0, ffn),  grad.slice(1, ffn, 2 * ffn),  activation};
    fast(precision) ? gated_activation_backward(args) : gated_activation_backward_reference<double>(args);
    accumulate_grad(gate_up, d_gate_up, true);
  });
  return out;
}

Var moe_combine(Tape& tape, const Var& expert_out, const Var& weights, const Tensor& destination) {
  const int64_t tokens = weights->value.dim(0), d = expert_out->value.dim(1);
  Var y =
      make_var(new_tensor(tape, expert_out->value, {tokens, d}), expert_out->requires_grad || weights->requires_grad);
  MoeCombineArgs args{expert_out->value, weights->value, destination, y->value, false};
  fast(tape.precision()) ? lathe::moe_combine(args) : moe_combine_reference<double>(args);
  if (!tape.recording() || !y->requires_grad) return y;
  const Precision precision = tape.precision();
  tape.record([expert_out, weights, destination, y, precision] {
    Tensor d_expert_out, d_weights;
    if (expert_out->requires_grad) d_expert_out = empty_like(expert_out->value);
    if (weights->requires_grad) d_weights = empty_like(weights->value);
    MoeCombineBackwardArgs args{expert_out->value,
                                weights->value,
                                destination,
                                y->grad,
                                d_expert_out.defined() ? d_expert_out.view() : TensorView{},
                                d_weights.defined() ? d_weights.view() : TensorView{}};
    fast(precision) ? moe_combine_backward(args) : moe_combine_backward_reference<double>(args);
    if (d_expert_out.defined()) accumulate_grad(expert_out, d_expert_out, true);
    if (d_weights.defined()) accumulate_grad(weights, d_weights, true);
  });
  return y;
}

}  // namespace lathe::autograd
