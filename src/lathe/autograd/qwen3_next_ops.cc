#include "lathe/autograd/qwen3_next_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lathe/core/parallel.h"

namespace lathe::autograd {
namespace {

bool fast(Precision precision) { return precision == Precision::fast; }

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// softplus(x) = log(1 + e^x), computed without overflow (torch's threshold 20: x itself above it).
template <class T>
T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}

// Elementwise loops run in parallel spans of kElementsPerTask (each element's result is the same
// for any thread count).
constexpr int64_t kElementsPerTask = 16384;

template <class T>
void sigmoid_multiply_forward(const Tensor& x, const Tensor& gate, const Tensor& out) {
  const T* in = x.ptr<T>();
  const T* g = gate.ptr<T>();
  T* y = out.ptr<T>();
  parallel_for(x.numel(), kElementsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = in[i] * sigmoid(g[i]);
  });
}

// dx = dy * s; dgate = dy * x * s (1 - s).
template <class T>
void sigmoid_multiply_backward(const Tensor& x, const Tensor& gate, const Tensor& dy, const Tensor& dx,
                               const Tensor& dgate) {
  const T* in = x.ptr<T>();
  const T* g = gate.ptr<T>();
  const T* d = dy.ptr<T>();
  parallel_for(x.numel(), kElementsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T s = sigmoid(g[i]);
      dx.ptr<T>()[i] = d[i] * s;
      dgate.ptr<T>()[i] = d[i] * in[i] * s * (T(1) - s);
    }
  });
}

template <class T>
void gates_forward(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& g,
                   const Tensor& beta) {
  const int64_t heads = a.dim(1), rows = a.dim(0);
  parallel_for(rows, std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(heads, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r)
                   for (int64_t h = 0; h < heads; ++h) {
                     const int64_t i = r * heads + h;
                     g.ptr<T>()[i] = -std::exp(a_log.ptr<T>()[h]) * softplus(a.ptr<T>()[i] + dt_bias.ptr<T>()[h]);
                     beta.ptr<T>()[i] = sigmoid(b.ptr<T>()[i]);
                   }
               });
}

// g = -A softplus(u), u = a + dt_bias, A = exp(a_log): dg/du = -A sigmoid(u), dg/da_log = g.
template <class T>
void gates_backward(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, const Tensor& dg,
                    const Tensor& dbeta, const Tensor& da, const Tensor& db, const Tensor& d_a_log,
                    const Tensor& d_dt_bias) {
  const int64_t heads = a.dim(1), rows = a.dim(0);
  Tensor a_log_terms = Tensor::empty(a.shape(), a.dtype());  // each element's share of d a_log
  T* terms = a_log_terms.ptr<T>();
  parallel_for(rows, std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(heads, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r)
                   for (int64_t h = 0; h < heads; ++h) {
                     const int64_t i = r * heads + h;
                     const T A = std::exp(a_log.ptr<T>()[h]);
                     const T u = a.ptr<T>()[i] + dt_bias.ptr<T>()[h];
                     const T grad_g = dg.defined() ? dg.ptr<T>()[i] : T(0);
                     da.ptr<T>()[i] = -A * sigmoid(u) * grad_g;
                     terms[i] = -A * softplus(u) * grad_g;
                     const T s = sigmoid(b.ptr<T>()[i]);
                     db.ptr<T>()[i] = (dbeta.defined() ? dbeta.ptr<T>()[i] : T(0)) * s * (T(1) - s);
                   }
               });
  // The per-head sums in row order, as one thread would add them.
  for (int64_t h = 0; h < heads; ++h) d_a_log.ptr<T>()[h] = d_dt_bias.ptr<T>()[h] = 0;
  for (int64_t i = 0; i < rows * heads; ++i) {
    d_dt_bias.ptr<T>()[i % heads] += da.ptr<T>()[i];
    d_a_log.ptr<T>()[i % heads] += terms[i];
  }
}

Tensor empty_like(const Var& var) { return Tensor::empty(var->value.shape(), var->value.dtype()); }

// out row i = source row rows[i] (any dtype).
void copy_rows(const Tensor& source, const std::vector<int64_t>& rows, const Tensor& out) {
  const size_t row_bytes = static_cast<size_t>(source.dim(1)) * dtype_size(source.dtype());
  const char* from = static_cast<const char*>(source.view().data);
  char* to = static_cast<char*>(out.view().data);
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(to + i * row_bytes, from + static_cast<size_t>(rows[i]) * row_bytes, row_bytes);
}

// target row rows[i] += grad row i.
template <class T>
void add_rows(const Tensor& grad, const std::vector<int64_t>& rows, const Tensor& target) {
  const int64_t in = grad.dim(1);
  for (size_t i = 0; i < rows.size(); ++i) {
    const T* from = grad.ptr<T>() + static_cast<int64_t>(i) * in;
    T* to = target.ptr<T>() + rows[i] * in;
    for (int64_t j = 0; j < in; ++j) to[j] += from[j];
  }
}

}  // namespace

Var gather_rows(Tape& tape, const Var& weight, std::vector<int64_t> rows) {
  const Tensor& value = weight->value;
  LATHE_ASSERT(value.shape().rank() == 2);
  for (int64_t row : rows) LATHE_ASSERT(row >= 0 && row < value.dim(0));
  const Shape shape{static_cast<int64_t>(rows.size()), value.dim(1)};
  Var out = make_var(Tensor::empty(shape, value.dtype()), weight->requires_grad);
  copy_rows(value, rows, out->value);
  if (weight->value_bf16.defined()) {
    out->value_bf16 = Tensor::empty(shape, DType::bf16);
    copy_rows(weight->value_bf16, rows, out->value_bf16);
  }
  if (!tape.recording() || !out->requires_grad) return out;
  tape.record([weight, out, rows = std::move(rows)] {
    if (!out->grad.defined()) return;
    bool accumulate = false;
    Tensor& grad = grad_buffer(weight, out->grad.dtype(), &accumulate);
    if (!accumulate) fill_value(grad, 0.0);  // rows this gather does not cover get no gradient from it
    LATHE_ASSERT(grad.dtype() == out->grad.dtype() && (grad.dtype() == DType::f32 || grad.dtype() == DType::f64));
    out->grad.dtype() == DType::f32 ? add_rows<float>(out->grad, rows, grad) : add_rows<double>(out->grad, rows, grad);
  });
  return out;
}

Var sigmoid_multiply(Tape& tape, const Var& x, const Var& gate) {
  LATHE_ASSERT(x->value.shape() == gate->value.shape());
  Var out = make_var(Tensor::empty(x->value.shape(), tape.dtype()), x->requires_grad || gate->requires_grad);
  fast(tape.precision()) ? sigmoid_multiply_forward<float>(x->value, gate->value, out->value)
                         : sigmoid_multiply_forward<double>(x->value, gate->value, out->value);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([x, gate, out, precision] {
    Tensor dx = empty_like(x), dgate = empty_like(gate);
    fast(precision) ? sigmoid_multiply_backward<float>(x->value, gate->value, out->grad, dx, dgate)
                    : sigmoid_multiply_backward<double>(x->value, gate->value, out->grad, dx, dgate);
    accumulate_grad(x, dx, true);
    accumulate_grad(gate, dgate, true);
  });
  return out;
}

DeltaGates gated_delta_gates(Tape& tape, const Var& a, const Var& b, const Var& a_log, const Var& dt_bias) {
  LATHE_ASSERT(a->value.shape().rank() == 2 && a->value.shape() == b->value.shape());
  LATHE_ASSERT(a_log->value.shape() == Shape({a->value.dim(1)}) && dt_bias->value.shape() == a_log->value.shape());
  const bool requires_grad = a->requires_grad || b->requires_grad || a_log->requires_grad || dt_bias->requires_grad;
  DeltaGates out{make_var(Tensor::empty(a->value.shape(), tape.dtype()), requires_grad),
                 make_var(Tensor::empty(a->value.shape(), tape.dtype()), requires_grad)};
  fast(tape.precision())
      ? gates_forward<float>(a->value, b->value, a_log->value, dt_bias->value, out.g->value, out.beta->value)
      : gates_forward<double>(a->value, b->value, a_log->value, dt_bias->value, out.g->value, out.beta->value);
  if (!tape.recording() || !requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([a, b, a_log, dt_bias, out, precision] {
    if (!out.g->grad.defined() && !out.beta->grad.defined()) return;
    Tensor da = empty_like(a), db = empty_like(b), d_a_log = empty_like(a_log), d_dt_bias = empty_like(dt_bias);
    fast(precision) ? gates_backward<float>(a->value, b->value, a_log->value, dt_bias->value, out.g->grad,
                                            out.beta->grad, da, db, d_a_log, d_dt_bias)
                    : gates_backward<double>(a->value, b->value, a_log->value, dt_bias->value, out.g->grad,
                                             out.beta->grad, da, db, d_a_log, d_dt_bias);
    accumulate_grad(a, da, true);
    accumulate_grad(b, db, true);
    accumulate_grad(a_log, d_a_log, true);
    accumulate_grad(dt_bias, d_dt_bias, true);
  });
  return out;
}

}  // namespace lathe::autograd
