#include "lathe/autograd/mamba2_ops.h"

#include <cmath>
#include <vector>

#include "lathe/core/parallel.h"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/gated_activation/gated_activation.h"

namespace lathe::autograd {
namespace {

bool fast(const Tape& tape) { return tape.precision() == Precision::fast; }

// On a GPU these ops run on host copies of their inputs and hand back their results on the
// inputs' device (staged through host memory, as the expert exchange is; a CUDA kernel for each
// is to come): host_side(t) is t itself on the host, a host copy of a device tensor.
Tensor host_side(const Tensor& tensor) { return on_host(tensor); }
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

struct GatedNormShape {
  int64_t rows, width, groups, group_width;
};

GatedNormShape gated_norm_shape(const Tensor& y, int64_t groups) {
  const int64_t width = y.dim(y.shape().rank() - 1);
  return {y.numel() / width, width, groups, width / groups};
}

// One group: gated = y * silu(z); returns r = 1 / sqrt(mean(gated^2) + eps).
template <class T>
T gate_group(const T* y, const T* z, int64_t width, double eps, T* gated) {
  T sum = 0;
  for (int64_t i = 0; i < width; ++i) {
    gated[i] = y[i] * z[i] * sigmoid(z[i]);
    sum += gated[i] * gated[i];
  }
  return T(1) / std::sqrt(sum / static_cast<T>(width) + static_cast<T>(eps));
}

// out = weight * n, n = g * r, g = y * silu(z), r = 1 / sqrt(mean over the group of g^2 + eps).
template <class T>
void gated_norm_forward(const Tensor& y, const Tensor& z, const Tensor& weight, int64_t groups, double eps,
                        const Tensor& out) {
  const GatedNormShape s = gated_norm_shape(y, groups);
  const T* yv = y.ptr<T>();
  const T* zv = z.ptr<T>();
  const T* w = weight.ptr<T>();
  T* o = out.ptr<T>();
  std::vector<T> gated(static_cast<size_t>(s.group_width));
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t group = 0; group < s.groups; ++group) {
      const int64_t base = r * s.width + group * s.group_width;
      const T inverse = gate_group(yv + base, zv + base, s.group_width, eps, gated.data());
      for (int64_t i = 0; i < s.group_width; ++i) o[base + i] = w[group * s.group_width + i] * gated[i] * inverse;
    }
}

// dn = grad * weight; dg = r (dn - n mean(dn n)); dy = dg silu(z); dz = dg y silu'(z),
// silu'(z) = sigmoid(z) (1 + z (1 - sigmoid(z))); dweight = sum over rows of grad * n.
template <class T>
void gated_norm_backward(const Tensor& grad, const Tensor& y, const Tensor& z, const Tensor& weight, int64_t groups,
                         double eps, const Tensor& dy, const Tensor& dz, const Tensor& dweight) {
  const GatedNormShape s = gated_norm_shape(y, groups);
  const T* g = grad.ptr<T>();
  const T* yv = y.ptr<T>();
  const T* zv = z.ptr<T>();
  const T* w = weight.ptr<T>();
  T* dyv = dy.ptr<T>();
  T* dzv = dz.ptr<T>();
  T* dw = dweight.ptr<T>();
  for (int64_t i = 0; i < s.width; ++i) dw[i] = 0;
  std::vector<T> gated(static_cast<size_t>(s.group_width)), dn(static_cast<size_t>(s.group_width));
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t group = 0; group < s.groups; ++group) {
      const int64_t base = r * s.width + group * s.group_width, column = group * s.group_width;
      const T inverse = gate_group(yv + base, zv + base, s.group_width, eps, gated.data());
      T dot = 0;  // sum of dn * n
      for (int64_t i = 0; i < s.group_width; ++i) {
        const T n = gated[i] * inverse;
        dn[i] = g[base + i] * w[column + i];
        dw[column + i] += g[base + i] * n;
        dot += dn[i] * n;
      }
      const T mean = dot / static_cast<T>(s.group_width);
      for (int64_t i = 0; i < s.group_width; ++i) {
        const T dg = inverse * (dn[i] - gated[i] * inverse * mean);
        const T zi = zv[base + i], sig = sigmoid(zi);
        dyv[base + i] = dg * zi * sig;
        dzv[base + i] = dg * yv[base + i] * sig * (T(1) + zi * (T(1) - sig));
      }
    }
}

// The f32 path. The gate g = silu(z) * y is the gated_activation op's (vectorised, threaded; its
// backward gives dy and dz from dg); the normalisation runs rows in parallel. The inverse RMS of
// row r's group: the same float sum in column order as the plain loops above.
constexpr int64_t kNormRowsPerBlock = 64;  // dweight partials per block of rows, summed in block order

float group_inverse_rms(const float* g, int64_t width, double eps) {
  float sum = 0;
  for (int64_t i = 0; i < width; ++i) sum += g[i] * g[i];
  return 1.0f / std::sqrt(sum / static_cast<float>(width) + static_cast<float>(eps));
}

TensorView rows_by_width(const Tensor& t, const GatedNormShape& s) { return t.view().reshape({s.rows, s.width}); }

Tensor silu_gate(const Tensor& y, const Tensor& z, const GatedNormShape& s) {  // y * silu(z), (rows, W)
  Tensor gated = Tensor::empty({s.rows, s.width}, DType::f32);
  lathe::gated_activation({rows_by_width(z, s), rows_by_width(y, s), gated, GatedActivation::silu});
  return gated;
}

void gated_norm_forward_fast(const Tensor& y, const Tensor& z, const Tensor& weight, int64_t groups, double eps,
                             const Tensor& out) {
  const GatedNormShape s = gated_norm_shape(y, groups);
  const Tensor gated = silu_gate(y, z, s);
  const float *g = gated.ptr<float>(), *w = weight.ptr<float>();
  float* o = out.ptr<float>();
  parallel_for(s.rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t group = 0; group < s.groups; ++group) {
        const int64_t base = r * s.width + group * s.group_width, column = group * s.group_width;
        const float inverse = group_inverse_rms(g + base, s.group_width, eps);
        for (int64_t i = 0; i < s.group_width; ++i) o[base + i] = w[column + i] * (g[base + i] * inverse);
      }
  });
}

// dg per row from the norm's formulas (see gated_norm_backward); dweight from per-block partials
// (fixed blocks of rows, so the sums do not depend on the thread count); then the gate's backward.
void gated_norm_backward_fast(const Tensor& grad, const Tensor& y, const Tensor& z, const Tensor& weight,
                              int64_t groups, double eps, const Tensor& dy, const Tensor& dz, const Tensor& dweight) {
  const GatedNormShape s = gated_norm_shape(y, groups);
  const Tensor gated = silu_gate(y, z, s);
  Tensor d_gated = Tensor::empty({s.rows, s.width}, DType::f32);
  const int64_t blocks = (s.rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock;
  std::vector<float> partials(static_cast<size_t>(blocks * s.width), 0.0f);
  const float *g = gated.ptr<float>(), *up = grad.ptr<float>(), *w = weight.ptr<float>();
  float* dg = d_gated.ptr<float>();
  parallel_for(blocks, 1, [&](int64_t block_begin, int64_t block_end) {
    for (int64_t block = block_begin; block < block_end; ++block) {
      float* dw = partials.data() + block * s.width;
      const int64_t row_end = std::min(s.rows, (block + 1) * kNormRowsPerBlock);
      for (int64_t r = block * kNormRowsPerBlock; r < row_end; ++r)
        for (int64_t group = 0; group < s.groups; ++group) {
          const int64_t base = r * s.width + group * s.group_width, column = group * s.group_width;
          const float inverse = group_inverse_rms(g + base, s.group_width, eps);
          float dot = 0;  // sum of dn * n, dn = grad * weight, n = g * inverse
          for (int64_t i = 0; i < s.group_width; ++i) {
            const float n = g[base + i] * inverse, dn = up[base + i] * w[column + i];
            dw[column + i] += up[base + i] * n;
            dot += dn * n;
          }
          const float mean = dot / static_cast<float>(s.group_width);
          for (int64_t i = 0; i < s.group_width; ++i)
            dg[base + i] = inverse * (up[base + i] * w[column + i] - g[base + i] * inverse * mean);
        }
    }
  });
  float* dw = dweight.ptr<float>();
  for (int64_t i = 0; i < s.width; ++i) dw[i] = 0;
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t i = 0; i < s.width; ++i) dw[i] += partials[block * s.width + i];
  lathe::gated_activation_backward({rows_by_width(z, s), rows_by_width(y, s), d_gated, rows_by_width(dz, s),
                                    rows_by_width(dy, s), GatedActivation::silu});
}

}  // namespace

Var mamba2_step_size(Tape& tape, const Var& dt, const Var& bias, double lower, double upper) {
  LATHE_ASSERT(bias->value.shape().rank() == 1 && dt->value.numel() % bias->value.numel() == 0);
  const Tensor dt_host = host_side(dt->value), bias_host = host_side(bias->value);
  Tensor out_host = Tensor::empty(dt->value.shape(), tape.dtype());
  fast(tape) ? step_size_forward<float>(dt_host, bias_host, lower, upper, out_host)
             : step_size_forward<double>(dt_host, bias_host, lower, upper, out_host);
  Var out = make_var(beside(dt->value, out_host), dt->requires_grad || bias->requires_grad);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([dt, bias, out, lower, upper, precision] {
    const Tensor dt_host = host_side(dt->value), bias_host = host_side(bias->value);
    Tensor d_dt = Tensor::empty(dt->value.shape(), dt->value.dtype());
    Tensor d_bias = Tensor::empty(bias->value.shape(), bias->value.dtype());
    precision == Precision::fast
        ? step_size_backward<float>(host_side(out->grad), dt_host, bias_host, lower, upper, d_dt, d_bias)
        : step_size_backward<double>(host_side(out->grad), dt_host, bias_host, lower, upper, d_dt, d_bias);
    accumulate_grad(bias, beside(bias->value, d_bias), true);
    accumulate_grad(dt, beside(dt->value, d_dt), true);
  });
  return out;
}

Var negative_exp(Tape& tape, const Var& a_log) {
  const Tensor a_host = host_side(a_log->value);
  Var out =
      make_var(beside(a_log->value, fast(tape) ? negative_exp_of<float>(a_host) : negative_exp_of<double>(a_host)),
               a_log->requires_grad);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([a_log, out, precision] {
    const Tensor grad = host_side(out->grad), value = host_side(out->value);
    accumulate_grad(a_log,
                    beside(a_log->value, precision == Precision::fast ? negative_exp_backward<float>(grad, value)
                                                                      : negative_exp_backward<double>(grad, value)),
                    true);
  });
  return out;
}

Var gated_group_rms_norm(Tape& tape, const Var& y, const Var& z, const Var& weight, int64_t groups, double eps) {
  const int64_t width = y->value.dim(y->value.shape().rank() - 1);
  LATHE_ASSERT(z->value.shape() == y->value.shape() && weight->value.numel() == width && groups > 0 &&
               width % groups == 0);
  const Tensor y_host = host_side(y->value), z_host = host_side(z->value), weight_host = host_side(weight->value);
  Tensor out_host = Tensor::empty(y->value.shape(), tape.dtype());
  fast(tape) ? gated_norm_forward_fast(y_host, z_host, weight_host, groups, eps, out_host)
             : gated_norm_forward<double>(y_host, z_host, weight_host, groups, eps, out_host);
  Var out = make_var(beside(y->value, out_host), y->requires_grad || z->requires_grad || weight->requires_grad);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([y, z, weight, out, groups, eps, precision] {
    const Tensor y_host = host_side(y->value), z_host = host_side(z->value), weight_host = host_side(weight->value);
    const Tensor grad = host_side(out->grad);
    const DType dtype = y->value.dtype();
    Tensor dy = Tensor::empty(y->value.shape(), dtype), dz = Tensor::empty(z->value.shape(), dtype);
    Tensor dweight = Tensor::empty(weight->value.shape(), dtype);
    precision == Precision::fast
        ? gated_norm_backward_fast(grad, y_host, z_host, weight_host, groups, eps, dy, dz, dweight)
        : gated_norm_backward<double>(grad, y_host, z_host, weight_host, groups, eps, dy, dz, dweight);
    accumulate_grad(weight, beside(weight->value, dweight), true);
    accumulate_grad(z, beside(z->value, dz), true);
    accumulate_grad(y, beside(y->value, dy), true);
  });
  return out;
}

}  // namespace lathe::autograd
