#include "lathe/autograd/qwen3_next_ops.h"

#include <algorithm>
#include <cmath>

#include "lathe/autograd/ops.h"
#include "lathe/core/parallel.h"
#include "lathe/device/device_tensor.h"

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

Tensor host_empty_like(const Var& var) { return Tensor::empty(var->value.shape(), var->value.dtype()); }

// On a GPU the delta-rule gates below run on host copies of their inputs and hand back their
// results on the inputs' device (staged through host memory, as the expert exchange is; a CUDA
// kernel for each is to come). The backward reuses the forward's host copies (captured), so each
// input crosses once.
Tensor beside(const Tensor& like, const Tensor& host) { return on_device(like.view().device, host); }

}  // namespace

Var gather_rows(Tape& tape, const Var& weight, std::vector<int64_t> rows) {
  const Tensor& value = weight->value;
  LATHE_ASSERT(value.shape().rank() == 2);
  Tensor ids = Tensor::empty({static_cast<int64_t>(rows.size())}, DType::i64);
  for (size_t i = 0; i < rows.size(); ++i) {
    LATHE_ASSERT(rows[i] >= 0 && rows[i] < value.dim(0));
    ids.ptr<int64_t>()[i] = rows[i];
  }
  // An embedding lookup of the rows (its backward adds each row's gradient to its source row).
  Var out = embedding(tape, weight, on_device(value.view().device, ids), 1.0f);
  if (weight->value_bf16.defined()) out->value_bf16 = converted(out->value, DType::bf16);  // the same bits
  return out;
}

Var sigmoid_multiply(Tape& tape, const Var& x, const Var& gate) {
  LATHE_ASSERT(x->value.shape() == gate->value.shape() && x->value.shape().rank() == 2);
  return gated_activation(tape, gate, x, GatedActivation::sigmoid);  // the GLU: sigmoid(gate) * x
}

DeltaGates gated_delta_gates(Tape& tape, const Var& a, const Var& b, const Var& a_log, const Var& dt_bias) {
  LATHE_ASSERT(a->value.shape().rank() == 2 && a->value.shape() == b->value.shape());
  LATHE_ASSERT(a_log->value.shape() == Shape({a->value.dim(1)}) && dt_bias->value.shape() == a_log->value.shape());
  const bool requires_grad = a->requires_grad || b->requires_grad || a_log->requires_grad || dt_bias->requires_grad;
  const Tensor a_host = on_host(a->value), b_host = on_host(b->value);
  const Tensor a_log_host = on_host(a_log->value), dt_bias_host = on_host(dt_bias->value);
  Tensor g_host = Tensor::empty(a->value.shape(), tape.dtype()),
         beta_host = Tensor::empty(a->value.shape(), tape.dtype());
  fast(tape.precision()) ? gates_forward<float>(a_host, b_host, a_log_host, dt_bias_host, g_host, beta_host)
                         : gates_forward<double>(a_host, b_host, a_log_host, dt_bias_host, g_host, beta_host);
  DeltaGates out{make_var(beside(a->value, g_host), requires_grad),
                 make_var(beside(a->value, beta_host), requires_grad)};
  if (!tape.recording() || !requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([a, b, a_log, dt_bias, out, a_host, b_host, a_log_host, dt_bias_host, precision] {
    if (!out.g->grad.defined() && !out.beta->grad.defined()) return;
    const Tensor dg = out.g->grad.defined() ? on_host(out.g->grad) : Tensor{};
    const Tensor dbeta = out.beta->grad.defined() ? on_host(out.beta->grad) : Tensor{};
    Tensor da = host_empty_like(a), db = host_empty_like(b), d_a_log = host_empty_like(a_log);
    Tensor d_dt_bias = host_empty_like(dt_bias);
    fast(precision)
        ? gates_backward<float>(a_host, b_host, a_log_host, dt_bias_host, dg, dbeta, da, db, d_a_log, d_dt_bias)
        : gates_backward<double>(a_host, b_host, a_log_host, dt_bias_host, dg, dbeta, da, db, d_a_log, d_dt_bias);
    accumulate_grad(a, beside(a->value, da), true);
    accumulate_grad(b, beside(b->value, db), true);
    accumulate_grad(a_log, beside(a_log->value, d_a_log), true);
    accumulate_grad(dt_bias, beside(dt_bias->value, d_dt_bias), true);
  });
  return out;
}

}  // namespace lathe::autograd
