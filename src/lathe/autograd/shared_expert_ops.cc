#include "lathe/autograd/shared_expert_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lathe/core/parallel.h"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/moe_combine/moe_combine.h"
#include "lathe/ops/moe_router/moe_router.h"

namespace lathe::autograd {
namespace {

// Rows per parallel task of the row-wise loops below (at least ~16K elements a task).
int64_t rows_per_task(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)); }

template <class T>
T sigmoid_of(T value) {
  return T(1) / (T(1) + std::exp(-value));
}

bool fast(Precision precision) { return precision == Precision::fast; }

// out = y + x * sigmoid(gate) per row: memory-bound, one pass beside the shared expert's matmuls.
template <class T>
void add_sigmoid_gated_rows(const Tensor& y, const Tensor& x, const Tensor& gate, const Tensor& out) {
  const int64_t rows = x.dim(0), d = x.dim(1);
  const T *y_data = y.ptr<T>(), *x_data = x.ptr<T>(), *g = gate.ptr<T>();
  T* o = out.ptr<T>();
  parallel_for(rows, rows_per_task(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T s = sigmoid_of(g[r]);
      for (int64_t j = 0; j < d; ++j) o[r * d + j] = y_data[r * d + j] + x_data[r * d + j] * s;
    }
  });
}

// dx = dout * s; dgate = s (1 - s) * <dout, x> per row (the dot summed in double).
template <class T>
void add_sigmoid_gated_rows_backward(const Tensor& x, const Tensor& gate, const Tensor& dout, const Tensor& dx,
                                     const Tensor& dgate) {
  const int64_t rows = x.dim(0), d = x.dim(1);
  const T *x_data = x.ptr<T>(), *g = gate.ptr<T>(), *dy = dout.ptr<T>();
  T *dx_data = dx.ptr<T>(), *dg = dgate.ptr<T>();
  parallel_for(rows, rows_per_task(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T s = sigmoid_of(g[r]);
      double dot = 0;
      for (int64_t j = 0; j < d; ++j) {
        dot += static_cast<double>(dy[r * d + j]) * static_cast<double>(x_data[r * d + j]);
        dx_data[r * d + j] = dy[r * d + j] * s;
      }
      dg[r] = static_cast<T>(dot * static_cast<double>(s * (T(1) - s)));
    }
  });
}

// Rows [row, row + part's rows) of `whole` = `part` (both contiguous, on one device).
void copy_rows_into(const Tensor& whole, int64_t row, const Tensor& part) {
  cuda::copy(whole.view().slice(0, row, row + part.dim(0)), part.view());
}

// The gate as a router of one expert with sigmoid scores: weights[t, 0] = sigmoid(gate[t]).
MoeRouterOptions one_sigmoid_expert() {
  MoeRouterOptions options;
  options.scoring = RouterScoring::sigmoid;
  options.top_k = 1;
  return options;
}

// The reference precision (f64): the plain loops.
Var add_sigmoid_gated_reference(Tape& tape, const Var& y, const Var& x, const Var& gate) {
  Var out = make_var(Tensor::empty(x->value.shape(), tape.dtype()),
                     y->requires_grad || x->requires_grad || gate->requires_grad);
  add_sigmoid_gated_rows<double>(y->value, x->value, gate->value, out->value);
  if (!tape.recording() || !out->requires_grad) return out;
  tape.record([y, x, gate, out] {
    if (x->requires_grad || gate->requires_grad) {
      Tensor dx = Tensor::empty(x->value.shape(), x->value.dtype());
      Tensor dgate = Tensor::empty(gate->value.shape(), gate->value.dtype());
      add_sigmoid_gated_rows_backward<double>(x->value, gate->value, out->grad, dx, dgate);
      accumulate_grad(x, dx, true);
      accumulate_grad(gate, dgate, true);
    }
    accumulate_grad(y, out->grad, true);  // last: nothing reads out->grad after y takes it
  });
  return out;
}

}  // namespace

Var add_sigmoid_gated(Tape& tape, const Var& y, const Var& x, const Var& gate) {
  LATHE_ASSERT(x->value.shape().rank() == 2 && gate->value.shape() == Shape({x->value.dim(0), 1}) &&
               y->value.shape() == x->value.shape());
  if (!fast(tape.precision())) return add_sigmoid_gated_reference(tape, y, x, gate);
  // The gate is a router over one expert with sigmoid scores and the sum its combine with the
  // identity permutation (y's value first): the library's ops, on the host or the GPU alike.
  const int64_t rows = x->value.dim(0);
  const Tensor probs = empty_beside(gate->value, {rows, 1}, DType::f32);
  const Tensor ids = empty_beside(gate->value, {rows, 1}, DType::i32);
  const Tensor weights = empty_beside(gate->value, {rows, 1}, DType::f32);
  moe_router({gate->value, {}, probs, ids, weights, one_sigmoid_expert()});
  Tensor identity = Tensor::empty({rows}, DType::i32);
  for (int64_t r = 0; r < rows; ++r) identity.ptr<int32_t>()[r] = static_cast<int32_t>(r);
  identity = on_device(x->value.view().device, identity);
  Var out = make_var(copy_on_same_device(y->value), y->requires_grad || x->requires_grad || gate->requires_grad);
  moe_combine({x->value, weights, identity, out->value, true});
  if (!tape.recording() || !out->requires_grad) return out;
  tape.record([y, x, gate, out, probs, ids, weights, identity] {
    if (x->requires_grad || gate->requires_grad) {
      Tensor dx = empty_like(x->value), d_weights = empty_like(weights), dgate = empty_like(gate->value);
      moe_combine_backward({x->value, weights, identity, out->grad, dx, d_weights});
      moe_router_backward({probs, ids, d_weights, {}, dgate, one_sigmoid_expert()});
      accumulate_grad(x, dx, true);
      accumulate_grad(gate, dgate, true);
    }
    accumulate_grad(y, out->grad, true);  // last: nothing reads out->grad after y takes it
  });
  return out;
}

Var stack_rows(Tape& tape, std::span<const Var> weights) {
  LATHE_ASSERT(!weights.empty());
  const Tensor& first = weights[0]->value;
  const int64_t in = first.dim(1);
  const bool bf16 = weights[0]->value_bf16.defined();
  int64_t rows = 0;
  bool requires_grad = false;
  for (const Var& weight : weights) {
    LATHE_ASSERT(weight->value.shape().rank() == 2 && weight->value.dim(1) == in &&
                 weight->value.dtype() == first.dtype() && weight->value_bf16.defined() == bf16);
    rows += weight->value.dim(0);
    requires_grad = requires_grad || weight->requires_grad;
  }
  Var stacked = make_var(empty_beside(first, {rows, in}, first.dtype()), requires_grad);
  if (bf16) stacked->value_bf16 = empty_beside(first, {rows, in}, DType::bf16);
  int64_t row = 0;
  for (const Var& weight : weights) {
    copy_rows_into(stacked->value, row, weight->value);
    if (bf16) copy_rows_into(stacked->value_bf16, row, weight->value_bf16);
    row += weight->value.dim(0);
  }
  if (!tape.recording() || !requires_grad) return stacked;
  tape.record([parts = std::vector<Var>(weights.begin(), weights.end()), stacked] {
    if (!stacked->grad.defined()) return;
    const TensorView grad = stacked->grad.view();
    int64_t row = 0;
    for (const Var& part : parts) {
      const int64_t count = part->value.dim(0);
      // The slices are disjoint and the stack's gradient is not read again: each may be taken.
      accumulate_grad(part, stacked->grad.share_view(grad.slice(0, row, row + count)), true);
      row += count;
    }
  });
  return stacked;
}

}  // namespace lathe::autograd
