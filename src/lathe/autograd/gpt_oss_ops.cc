#include "lathe/autograd/gpt_oss_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lathe::autograd {
namespace {

bool fast(const Tape& tape) { return tape.precision() == Precision::fast; }

// o (batch, seq, heads, head_dim) and lse (batch, heads, seq) in place: lse' = logaddexp(lse, sink_h),
// o *= exp(lse - lse').
template <class T>
void fold_sinks_into(const Tensor& o, const Tensor& lse, const Tensor& sinks) {
  const int64_t batch = o.dim(0), seq = o.dim(1), heads = o.dim(2), head_dim = o.dim(3);
  T* out = o.ptr<T>();
  T* log_sum = lse.ptr<T>();
  const T* sink = sinks.ptr<T>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < seq; ++i) {
        T& l = log_sum[(b * heads + h) * seq + i];
        const T s = sink[h];
        const T m = std::max(l, s);  // l may be -inf (no visible key); s is finite
        const T combined = m + std::log(std::exp(l - m) + std::exp(s - m));
        const T factor = std::exp(l - combined);
        T* row = out + ((b * seq + i) * heads + h) * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) row[d] *= factor;
        l = combined;
      }
}

// d sink_h = -sum_{b, i} exp(sink_h - lse'[b, h, i]) * sum_d do * o'.
template <class T>
Tensor sink_gradient(const Tensor& o, const Tensor& d_o, const Tensor& lse, const Tensor& sinks) {
  const int64_t batch = o.dim(0), seq = o.dim(1), heads = o.dim(2), head_dim = o.dim(3);
  Tensor grad = Tensor::zeros({heads}, sinks.dtype());
  const T* out = o.ptr<T>();
  const T* d_out = d_o.ptr<T>();
  const T* log_sum = lse.ptr<T>();
  const T* sink = sinks.ptr<T>();
  T* g = grad.ptr<T>();
  for (int64_t h = 0; h < heads; ++h) {
    double total = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < seq; ++i) {
        const int64_t at = ((b * seq + i) * heads + h) * head_dim;
        double dot = 0;
        for (int64_t d = 0; d < head_dim; ++d) dot += static_cast<double>(d_out[at + d]) * out[at + d];
        total += std::exp(static_cast<double>(sink[h]) - log_sum[(b * heads + h) * seq + i]) * dot;
      }
    g[h] = static_cast<T>(-total);
  }
  return grad;
}

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

template <class T>
void clamped_swiglu_forward(const Tensor& gate_up, const Tensor& out, T alpha, T limit) {
  const int64_t rows = out.dim(0), ffn = out.dim(1);
  const T* x = gate_up.ptr<T>();
  T* y = out.ptr<T>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < ffn; ++j) {
      const T g = std::min(x[r * 2 * ffn + 2 * j], limit);
      const T u = std::clamp(x[r * 2 * ffn + 2 * j + 1], -limit, limit);
      y[r * ffn + j] = (u + T(1)) * g * sigmoid(alpha * g);
    }
}

template <class T>
Tensor clamped_swiglu_backward(const Tensor& gate_up, const Tensor& d_out, T alpha, T limit) {
  const int64_t rows = d_out.dim(0), ffn = d_out.dim(1);
  Tensor grad = Tensor::empty(gate_up.shape(), gate_up.dtype());
  const T* x = gate_up.ptr<T>();
  const T* dy = d_out.ptr<T>();
  T* dx = grad.ptr<T>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < ffn; ++j) {
      const T gate = x[r * 2 * ffn + 2 * j], up = x[r * 2 * ffn + 2 * j + 1];
      const T g = std::min(gate, limit), u = std::clamp(up, -limit, limit);
      const T s = sigmoid(alpha * g), dyj = dy[r * ffn + j];
      // d/dg [g * sigmoid(alpha g)] = s + alpha * g * s * (1 - s)
      dx[r * 2 * ffn + 2 * j] = gate <= limit ? dyj * (u + T(1)) * (s + alpha * g * s * (T(1) - s)) : T(0);
      dx[r * 2 * ffn + 2 * j + 1] = up >= -limit && up <= limit ? dyj * g * s : T(0);
    }
  return grad;
}

template <class T>
void grouped_bias_forward(const Tensor& x, const Tensor& bias, const Tensor& offsets, const Tensor& out) {
  const int64_t experts = bias.dim(0), dim = bias.dim(1);
  const int64_t* offset = offsets.ptr<int64_t>();
  const T* input = x.ptr<T>();
  const T* b = bias.ptr<T>();
  T* output = out.ptr<T>();
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t row = offset[e]; row < offset[e + 1]; ++row)
      for (int64_t i = 0; i < dim; ++i) output[row * dim + i] = input[row * dim + i] + b[e * dim + i];
}

template <class T>
Tensor grouped_bias_backward(const Tensor& d_out, const Tensor& bias, const Tensor& offsets) {
  const int64_t experts = bias.dim(0), dim = bias.dim(1);
  Tensor grad = Tensor::zeros(bias.shape(), bias.dtype());
  const int64_t* offset = offsets.ptr<int64_t>();
  const T* dy = d_out.ptr<T>();
  T* g = grad.ptr<T>();
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t row = offset[e]; row < offset[e + 1]; ++row)
      for (int64_t i = 0; i < dim; ++i) g[e * dim + i] += dy[row * dim + i];
  return grad;
}

}  // namespace

Var attention_with_sinks(Tape& tape, const Var& q, const Var& k, const Var& v, const Var& sinks,
                         const FlashAttentionOptions& options) {
  const int64_t batch = q->value.dim(0), seq_q = q->value.dim(1), heads = q->value.dim(2);
  LATHE_ASSERT(sinks->value.shape() == Shape({heads}) && sinks->value.dtype() == tape.dtype());
  Var out = make_var(Tensor::empty({batch, seq_q, heads, v->value.dim(3)}, tape.dtype()),
                     q->requires_grad || k->requires_grad || v->requires_grad || sinks->requires_grad);
  Tensor lse = Tensor::empty({batch, heads, seq_q}, tape.dtype());
  FlashAttentionArgs args{q->value, k->value, v->value, out->value, lse, options};
  if (fast(tape)) {
    flash_attention(args);
    fold_sinks_into<float>(out->value, lse, sinks->value);
  } else {
    flash_attention_reference<double>(args);
    fold_sinks_into<double>(out->value, lse, sinks->value);
  }
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([q, k, v, sinks, out, lse, options, precision] {
    const DType dtype = q->value.dtype();
    Tensor dq = Tensor::empty(q->value.shape(), dtype), dk = Tensor::empty(k->value.shape(), dtype),
           dv = Tensor::empty(v->value.shape(), dtype);
    FlashAttentionBackwardArgs args{q->value, k->value, v->value, out->value, lse, out->grad, dq, dk, dv, options};
    const bool is_fast = precision == Precision::fast;
    is_fast ? flash_attention_backward(args) : flash_attention_backward_reference<double>(args);
    if (sinks->requires_grad)
      accumulate_grad(sinks,
                      is_fast ? sink_gradient<float>(out->value, out->grad, lse, sinks->value)
                              : sink_gradient<double>(out->value, out->grad, lse, sinks->value),
                      true);
    accumulate_grad(q, dq, true);
    accumulate_grad(k, dk, true);
    accumulate_grad(v, dv, true);
  });
  return out;
}

Var clamped_swiglu(Tape& tape, const Var& gate_up, double alpha, double limit) {
  const Shape& shape = gate_up->value.shape();
  LATHE_ASSERT(shape.rank() == 2 && shape[1] % 2 == 0);
  Var out = make_var(Tensor::empty({shape[0], shape[1] / 2}, tape.dtype()), gate_up->requires_grad);
  fast(tape)
      ? clamped_swiglu_forward<float>(gate_up->value, out->value, static_cast<float>(alpha), static_cast<float>(limit))
      : clamped_swiglu_forward<double>(gate_up->value, out->value, alpha, limit);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([gate_up, out, alpha, limit, precision] {
    accumulate_grad(gate_up,
                    precision == Precision::fast
                        ? clamped_swiglu_backward<float>(gate_up->value, out->grad, static_cast<float>(alpha),
                                                         static_cast<float>(limit))
                        : clamped_swiglu_backward<double>(gate_up->value, out->grad, alpha, limit),
                    true);
  });
  return out;
}

Var grouped_add_bias(Tape& tape, const Var& x, const Var& bias, const Tensor& group_offsets) {
  const Shape& shape = x->value.shape();
  LATHE_ASSERT(shape.rank() == 2 && bias->value.shape().rank() == 2 && bias->value.dim(1) == shape[1]);
  LATHE_ASSERT(group_offsets.dtype() == DType::i64 && group_offsets.numel() == bias->value.dim(0) + 1);
  Var out = make_var(Tensor::empty(shape, tape.dtype()), x->requires_grad || bias->requires_grad);
  fast(tape) ? grouped_bias_forward<float>(x->value, bias->value, group_offsets, out->value)
             : grouped_bias_forward<double>(x->value, bias->value, group_offsets, out->value);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([x, bias, out, group_offsets, precision] {
    if (bias->requires_grad)
      accumulate_grad(bias,
                      precision == Precision::fast
                          ? grouped_bias_backward<float>(out->grad, bias->value, group_offsets)
                          : grouped_bias_backward<double>(out->grad, bias->value, group_offsets),
                      true);
    accumulate_grad(x, out->grad, true);
  });
  return out;
}

}  // namespace lathe::autograd
