#include "lathe/autograd/shared_expert_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lathe/core/parallel.h"

namespace lathe::autograd {
namespace {

// Rows per parallel task of the row-wise loops below (at least ~16K elements a task).
int64_t rows_per_task(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)); }

template <class T>
T sigmoid_of(T value) {
  return T(1) / (T(1) + std::exp(-value));
}

bool fast(Precision precision) { return precision == Precision::fast; }

Tensor new_tensor(const Tape& tape, const Shape& shape) { return Tensor::empty(shape, tape.dtype()); }

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

// Copies `part`'s elements (contiguous) into `whole` from element `offset` on.
void copy_into(const Tensor& whole, int64_t offset, const Tensor& part) {
  const size_t element = dtype_size(part.dtype());
  std::memcpy(static_cast<char*>(whole.view().data) + offset * element, part.view().data,
              static_cast<size_t>(part.numel()) * element);
}

}  // namespace

Var add_sigmoid_gated(Tape& tape, const Var& y, const Var& x, const Var& gate) {
  LATHE_ASSERT(x->value.shape().rank() == 2 && gate->value.shape() == Shape({x->value.dim(0), 1}) &&
               y->value.shape() == x->value.shape());
  Var out = make_var(new_tensor(tape, x->value.shape()), y->requires_grad || x->requires_grad || gate->requires_grad);
  fast(tape.precision()) ? add_sigmoid_gated_rows<float>(y->value, x->value, gate->value, out->value)
                         : add_sigmoid_gated_rows<double>(y->value, x->value, gate->value, out->value);
  if (!tape.recording() || !out->requires_grad) return out;
  const Precision precision = tape.precision();
  tape.record([y, x, gate, out, precision] {
    if (x->requires_grad || gate->requires_grad) {
      Tensor dx = Tensor::empty(x->value.shape(), x->value.dtype());
      Tensor dgate = Tensor::empty(gate->value.shape(), gate->value.dtype());
      fast(precision) ? add_sigmoid_gated_rows_backward<float>(x->value, gate->value, out->grad, dx, dgate)
                      : add_sigmoid_gated_rows_backward<double>(x->value, gate->value, out->grad, dx, dgate);
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
  Var stacked = make_var(Tensor::empty({rows, in}, first.dtype()), requires_grad);
  if (bf16) stacked->value_bf16 = Tensor::empty({rows, in}, DType::bf16);
  int64_t offset = 0;
  for (const Var& weight : weights) {
    copy_into(stacked->value, offset, weight->value);
    if (bf16) copy_into(stacked->value_bf16, offset, weight->value_bf16);
    offset += weight->value.numel();
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
