#include "lathe/autograd/gemma4_ops.h"

#include "lathe/ops/add/add.h"
#include "lathe/ops/moe_expert_scale/moe_expert_scale.h"

namespace lathe::autograd {
namespace {

bool fast(const Tape& tape) { return tape.precision() == Precision::fast; }

// x * factor: the add op without its first operand on x's device (fast: the CPU's vector multiply,
// the GPU's kernel, the same rounding), a double loop on the host for the reference tape.
Tensor scaled(const Tensor& x, float factor, Precision precision) {
  Tensor out = empty_like(x);
  if (precision == Precision::fast) {
    add({TensorView{}, x.view(), out.view(), factor});
  } else {
    const double* in = x.ptr<double>();
    double* y = out.ptr<double>();
    for (int64_t i = 0; i < x.numel(); ++i) y[i] = in[i] * static_cast<double>(factor);
  }
  return out;
}

template <class T>
void expert_scale_forward(const Tensor& weights, const Tensor& scale, const Tensor& ids, const Tensor& out) {
  const T* w = weights.ptr<T>();
  const T* s = scale.ptr<T>();
  const int32_t* id = ids.ptr<int32_t>();
  T* y = out.ptr<T>();
  for (int64_t i = 0; i < weights.numel(); ++i) y[i] = w[i] * s[id[i]];
}

// d weights and d expert_scale from dy; the scale's sum runs in slot order (the float64 tape's loops;
// the fast tape runs the moe_expert_scale op).
template <class T>
void expert_scale_backward(const Tensor& dy, const Tensor& weights, const Tensor& scale, const Tensor& ids,
                           const Tensor& d_weights, const Tensor& d_scale) {
  const T* g = dy.ptr<T>();
  const T* w = weights.ptr<T>();
  const T* s = scale.ptr<T>();
  const int32_t* id = ids.ptr<int32_t>();
  T* dw = d_weights.ptr<T>();
  T* ds = d_scale.ptr<T>();
  for (int64_t e = 0; e < scale.numel(); ++e) ds[e] = 0;
  for (int64_t i = 0; i < weights.numel(); ++i) {
    dw[i] = g[i] * s[id[i]];
    ds[id[i]] += g[i] * w[i];
  }
}

}  // namespace

Var scale(Tape& tape, const Var& x, float factor) {
  Var out = make_var(scaled(x->value, factor, tape.precision()), x->requires_grad);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([x, out, factor, precision] { accumulate_grad(x, scaled(out->grad, factor, precision), true); });
  return out;
}

Var scale_by_expert(Tape& tape, const Var& weights, const Var& expert_scale, const Tensor& expert_ids) {
  LATHE_ASSERT(weights->value.shape() == expert_ids.shape() && expert_ids.dtype() == DType::i32);
  LATHE_ASSERT(expert_scale->value.shape().rank() == 1);
  Var out = make_var(empty_beside(weights->value, weights->value.shape(), tape.dtype()),
                     weights->requires_grad || expert_scale->requires_grad);
  if (fast(tape))
    moe_expert_scale({weights->value, expert_scale->value, expert_ids, out->value});
  else
    expert_scale_forward<double>(weights->value, expert_scale->value, expert_ids, out->value);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([weights, expert_scale, expert_ids, out, precision] {
    const DType dtype = weights->value.dtype();
    Tensor d_weights = empty_beside(weights->value, weights->value.shape(), dtype);
    Tensor d_scale = empty_beside(expert_scale->value, expert_scale->value.shape(), dtype);
    if (precision == Precision::fast)
      moe_expert_scale_backward({out->grad, weights->value, expert_scale->value, expert_ids, d_weights, d_scale});
    else
      expert_scale_backward<double>(out->grad, weights->value, expert_scale->value, expert_ids, d_weights, d_scale);
    accumulate_grad(expert_scale, d_scale, true);
    accumulate_grad(weights, d_weights, true);
  });
  return out;
}

}  // namespace lathe::autograd
