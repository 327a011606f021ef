#include "lathe/autograd/head_gate_ops.h"

namespace lathe::autograd {
namespace {

// An optional operand's view: empty (data null) when the tensor is absent.
TensorView view_or_none(const Tensor& tensor) { return tensor.defined() ? tensor.view() : TensorView{}; }

}  // namespace

Var head_gate(Tape& tape, const Var& x, const Var& bias, const Var& a_log, HeadGateActivation activation, double lower,
              double upper) {
  const Shape& shape = x->value.shape();
  LATHE_ASSERT(shape.rank() >= 1);
  const int64_t heads = shape[shape.rank() - 1], rows = heads > 0 ? x->value.numel() / heads : 0;
  LATHE_ASSERT(!bias || bias->value.shape() == Shape({heads}));
  LATHE_ASSERT(!a_log || a_log->value.shape() == Shape({heads}));
  // The op's (rows, heads) views of x-shaped contiguous tensors.
  auto as_rows = [rows, heads](const Tensor& t) { return t.view().reshape({rows, heads}); };
  const bool requires_grad = x->requires_grad || (bias && bias->requires_grad) || (a_log && a_log->requires_grad);
  Var out = make_var(empty_beside(x->value, shape, tape.dtype()), requires_grad);
  const HeadGateArgs args{as_rows(x->value),
                          bias ? bias->value.view() : TensorView{},
                          a_log ? a_log->value.view() : TensorView{},
                          as_rows(out->value),
                          activation,
                          lower,
                          upper};
  tape.precision() == Precision::fast ? lathe::head_gate(args) : head_gate_reference<double>(args);
  if (!tape.recording() || !requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([x, bias, a_log, out, args, as_rows, precision] {
    if (!out->grad.defined()) return;
    Tensor dx = empty_like(x->value), dbias, d_a_log;
    if (bias && bias->requires_grad) dbias = empty_like(bias->value);
    if (a_log && a_log->requires_grad) d_a_log = empty_like(a_log->value);
    const HeadGateBackwardArgs backward{args.x,
                                        args.bias,
                                        args.a_log,
                                        as_rows(out->grad),
                                        as_rows(dx),
                                        view_or_none(dbias),
                                        view_or_none(d_a_log),
                                        args.activation,
                                        args.lower,
                                        args.upper};
    precision == Precision::fast ? lathe::head_gate_backward(backward) : head_gate_backward_reference<double>(backward);
    if (d_a_log.defined()) accumulate_grad(a_log, d_a_log, true);
    if (dbias.defined()) accumulate_grad(bias, dbias, true);
    accumulate_grad(x, dx, true);
  });
  return out;
}

}  // namespace lathe::autograd
