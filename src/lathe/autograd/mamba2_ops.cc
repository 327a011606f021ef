#include "lathe/autograd/mamba2_ops.h"

#include <cmath>
#include <vector>

#include "lathe/device/device_tensor.h"
#include "lathe/ops/gated_rms_norm/gated_rms_norm.h"

namespace lathe::autograd {
namespace {

bool fast(const Tape& tape) { return tape.precision() == Precision::fast; }

// On a GPU these ops run on host copies of their inputs and hand back their results on the
// inputs' device (staged through host memory, as the expert exchange is; a CUDA kernel for each
// is to come). The backward reuses the forward's host copies (captured), so each input crosses once.
Tensor beside(const Tensor& like, const Tensor& host) { return on_device(like.view().device, host); }

// torch.nn.functional.softplus with beta 1 and threshold 20.
template <class T>
T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}
template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
void step_size_forward(const Tensor& dt, const Tensor& bias, double lower, double upper, const Tensor& out) {
  const int64_t heads = bias.numel(), rows = dt.numel() / heads;
  const T* x = dt.ptr<T>();
  const T* b = bias.ptr<T>();
  T* y = out.ptr<T>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      T value = std::max(softplus(x[r * heads + h] + b[h]), static_cast<T>(lower));
      if (upper > 0) value = std::min(value, static_cast<T>(upper));
      y[r * heads + h] = value;
    }
}

// d(dt) and d(bias) (summed over rows in order); torch's clamp passes the gradient where
// lower <= value <= upper.
template <class T>
void step_size_backward(const Tensor& grad, const Tensor& dt, const Tensor& bias, double lower, double upper,
                        const Tensor& d_dt, const Tensor& d_bias) {
  const int64_t heads = bias.numel(), rows = dt.numel() / heads;
  const T* g = grad.ptr<T>();
  const T* x = dt.ptr<T>();
  const T* b = bias.ptr<T>();
  T* dx = d_dt.ptr<T>();
  T* db = d_bias.ptr<T>();
  for (int64_t h = 0; h < heads; ++h) db[h] = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      const T input = x[r * heads + h] + b[h];
      const T value = softplus(input);
      const bool passes = value >= static_cast<T>(lower) && (upper <= 0 || value <= static_cast<T>(upper));
      const T derivative = input > T(20) ? T(1) : sigmoid(input);
      const T d = passes ? g[r * heads + h] * derivative : T(0);
      dx[r * heads + h] = d;
      db[h] += d;
    }
}

template <class T>
Tensor negative_exp_of(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) out.ptr<T>()[i] = -std::exp(x.ptr<T>()[i]);
  return out;
}

// d a_log = grad * (-exp(a_log)) = grad * out.
template <class T>
Tensor negative_exp_backward(const Tensor& grad, const Tensor& out) {
  Tensor d = Tensor::empty(out.shape(), out.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) d.ptr<T>()[i] = grad.ptr<T>()[i] * out.ptr<T>()[i];
  return d;
}

}  // namespace

Var mamba2_step_size(Tape& tape, const Var& dt, const Var& bias, double lower, double upper) {
  LATHE_ASSERT(bias->value.shape().rank() == 1 && dt->value.numel() % bias->value.numel() == 0);
  const Tensor dt_host = on_host(dt->value), bias_host = on_host(bias->value);
  Tensor out_host = Tensor::empty(dt->value.shape(), tape.dtype());
  fast(tape) ? step_size_forward<float>(dt_host, bias_host, lower, upper, out_host)
             : step_size_forward<double>(dt_host, bias_host, lower, upper, out_host);
  Var out = make_var(beside(dt->value, out_host), dt->requires_grad || bias->requires_grad);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([dt, bias, out, dt_host, bias_host, lower, upper, precision] {
    Tensor d_dt = Tensor::empty(dt->value.shape(), dt->value.dtype());
    Tensor d_bias = Tensor::empty(bias->value.shape(), bias->value.dtype());
    precision == Precision::fast
        ? step_size_backward<float>(on_host(out->grad), dt_host, bias_host, lower, upper, d_dt, d_bias)
        : step_size_backward<double>(on_host(out->grad), dt_host, bias_host, lower, upper, d_dt, d_bias);
    accumulate_grad(bias, beside(bias->value, d_bias), true);
    accumulate_grad(dt, beside(dt->value, d_dt), true);
  });
  return out;
}

Var negative_exp(Tape& tape, const Var& a_log) {
  const Tensor a_host = on_host(a_log->value);
  const Tensor out_host = fast(tape) ? negative_exp_of<float>(a_host) : negative_exp_of<double>(a_host);
  Var out = make_var(beside(a_log->value, out_host), a_log->requires_grad);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([a_log, out, out_host, precision] {
    const Tensor grad = on_host(out->grad), value = out_host;
    accumulate_grad(a_log,
                    beside(a_log->value, precision == Precision::fast ? negative_exp_backward<float>(grad, value)
                                                                      : negative_exp_backward<double>(grad, value)),
                    true);
  });
  return out;
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
