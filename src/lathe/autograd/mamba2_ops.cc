#include "lathe/autograd/mamba2_ops.h"

#include <limits>

#include "lathe/autograd/head_gate_ops.h"
#include "lathe/ops/gated_rms_norm/gated_rms_norm.h"

namespace lathe::autograd {
namespace {

bool fast(const Tape& tape) { return tape.precision() == Precision::fast; }

}  // namespace

Var mamba2_step_size(Tape& tape, const Var& dt, const Var& bias, double lower, double upper) {
  return head_gate(tape, dt, bias, nullptr, HeadGateActivation::softplus, lower,
                   upper > 0 ? upper : std::numeric_limits<double>::infinity());
}

Var negative_exp(Tape& tape, const Var& a_log) {
  return head_gate(tape, a_log, nullptr, nullptr, HeadGateActivation::negative_exp);
}

Var gated_group_rms_norm(Tape& tape, const Var& y, const Var& z, const Var& weight, int64_t groups, double eps) {
  const Shape& shape = y->value.shape();
  const int64_t width = shape[shape.rank() - 1], rows = width > 0 ? y->value.numel() / width : 0;
  LATHE_ASSERT(z->value.shape() == shape && weight->value.numel() == width);
  auto as_rows = [rows, width](const Tensor& t) {
    return t.view().reshape({rows, width});
  };  // contiguous (rows, width)
  Var out = make_var(empty_beside(y->value, shape, tape.dtype()),
                     y->requires_grad || z->requires_grad || weight->requires_grad);
  const GatedRmsNormArgs args{as_rows(y->value), as_rows(z->value), weight->value, as_rows(out->value), groups, eps};
  fast(tape) ? gated_rms_norm(args) : gated_rms_norm_reference<double>(args);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([y, z, weight, out, groups, eps, as_rows, precision] {
    Tensor dy = empty_like(y->value), dz = empty_like(z->value), dweight = empty_like(weight->value);
    const GatedRmsNormBackwardArgs args{as_rows(y->value),
                                        as_rows(z->value),
                                        weight->value,
                                        as_rows(out->grad),
                                        as_rows(dy),
                                        as_rows(dz),
                                        dweight,
                                        groups,
                                        eps};
    precision == Precision::fast ? gated_rms_norm_backward(args) : gated_rms_norm_backward_reference<double>(args);
    accumulate_grad(weight, dweight, true);
    accumulate_grad(z, dz, true);
    accumulate_grad(y, dy, true);
  });
  return out;
}

}  // namespace lathe::autograd
