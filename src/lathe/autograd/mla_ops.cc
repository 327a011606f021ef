#include "lathe/autograd/mla_ops.h"

#include <numeric>

#include "lathe/core/error.h"
#include "lathe/device/device_tensor.h"

namespace lathe::autograd {
namespace {

Shape with_last(const Shape& shape, int64_t last) {
  Shape out = shape;
  out[out.rank() - 1] = last;
  return out;
}

// A contiguous tensor's view as (rows, last dim).
TensorView as_rows(const Tensor& tensor, int64_t rows) {
  const Shape& shape = tensor.shape();
  return tensor.view().reshape({rows, shape[shape.rank() - 1]});
}

}  // namespace

// Every copy is a 2-D copy between row layouts (device/device_tensor.h's cuda::copy: a host copy
// for host tensors, cudaMemcpy2D on the GPU), so the same code moves host and device tensors.
std::vector<Var> split_last_dim(Tape& tape, const Var& x, std::span<const int64_t> widths) {
  const Shape shape = x->value.shape();
  const int64_t total = shape[shape.rank() - 1];
  LATHE_CHECK(std::accumulate(widths.begin(), widths.end(), int64_t{0}) == total, "split_last_dim: widths sum to ",
              std::accumulate(widths.begin(), widths.end(), int64_t{0}), ", last dim is ", total);
  const int64_t rows = total > 0 ? x->value.numel() / total : 0;
  std::vector<Var> pieces;
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (int64_t width : widths) {
    Var piece = make_var(empty_beside(x->value, with_last(shape, width), x->value.dtype()), x->requires_grad);
    if (rows > 0 && width > 0)
      cuda::copy(as_rows(piece->value, rows), as_rows(x->value, rows).slice(1, offset, offset + width));
    pieces.push_back(piece);
    offsets.push_back(offset);
    offset += width;
  }
  if (!tape.recording() || !x->requires_grad) return pieces;
  tape.record([x, pieces, offsets, rows] {
    Tensor grad = zeros_on(x->value.view().device, x->value.shape(), x->value.dtype());
    for (size_t i = 0; i < pieces.size(); ++i) {
      const int64_t width = pieces[i]->value.shape()[pieces[i]->value.shape().rank() - 1];
      if (!pieces[i]->grad.defined() || rows == 0 || width == 0) continue;
      cuda::copy(as_rows(grad, rows).slice(1, offsets[i], offsets[i] + width), as_rows(pieces[i]->grad, rows));
    }
    accumulate_grad(x, grad, true);
  });
  return pieces;
}

Var concat_heads(Tape& tape, const Var& a, const Var& b) {
  const Shape a_shape = a->value.shape(), b_shape = b->value.shape();
  const int64_t rank = a_shape.rank();
  LATHE_CHECK(rank >= 2 && b_shape.rank() == rank && a->value.dtype() == b->value.dtype(), "concat_heads: a is ",
              a_shape.to_string(), ", b is ", b_shape.to_string());
  for (int64_t d = 0; d + 2 < rank; ++d)
    LATHE_CHECK(a_shape[d] == b_shape[d], "concat_heads: leading dims differ: ", a_shape.to_string(), " vs ",
                b_shape.to_string());
  const int64_t heads = a_shape[rank - 2], b_heads = b_shape[rank - 2];
  LATHE_CHECK(b_heads == heads || b_heads == 1, "concat_heads: b has ", b_heads, " heads, expected ", heads, " or 1");
  const int64_t wa = a_shape[rank - 1], wb = b_shape[rank - 1], width = wa + wb;
  int64_t groups = 1;  // leading positions
  for (int64_t d = 0; d + 2 < rank; ++d) groups *= a_shape[d];
  Var out = make_var(empty_beside(a->value, with_last(a_shape, width), a->value.dtype()),
                     a->requires_grad || b->requires_grad);
  if (groups * heads == 0) return out;
  // out as (groups, heads, width): a fills columns [0, wa), b columns [wa, width) of every head.
  const TensorView out3 = out->value.view().reshape({groups, heads, width});
  if (wa > 0) cuda::copy(out3.reshape({groups * heads, width}).slice(1, 0, wa), as_rows(a->value, groups * heads));
  if (wb > 0) {
    if (b_heads == heads)
      cuda::copy(out3.reshape({groups * heads, width}).slice(1, wa, width), as_rows(b->value, groups * heads));
    else
      for (int64_t h = 0; h < heads; ++h) cuda::copy(out3.select(1, h).slice(1, wa, width), as_rows(b->value, groups));
  }
  if (!tape.recording() || !out->requires_grad) return out;
  tape.record([a, b, out, groups, heads, b_heads, wa, wb, width] {
    const TensorView grad3 = out->grad.view().reshape({groups, heads, width});
    if (a->requires_grad) {
      Tensor da = empty_like(a->value);
      if (wa > 0) cuda::copy(as_rows(da, groups * heads), grad3.reshape({groups * heads, width}).slice(1, 0, wa));
      accumulate_grad(a, da, true);
    }
    if (b->requires_grad) {
      Tensor db = zeros_on(b->value.view().device, b->value.shape(), b->value.dtype());
      if (wb > 0 && b_heads == heads) {
        cuda::copy(as_rows(db, groups * heads), grad3.reshape({groups * heads, width}).slice(1, wa, width));
      } else if (wb > 0) {
        // The broadcast row's gradient: the heads' rows summed in head order (the same bits on
        // both devices: one rounding per add, from zero).
        const TensorView db_rows = as_rows(db, groups);
        Tensor head_rows = empty_beside(db, {groups, wb}, db.dtype());
        for (int64_t h = 0; h < heads; ++h) {
          cuda::copy(head_rows, grad3.select(1, h).slice(1, wa, width));
          add_tensors(db.dtype() == DType::f64 ? Precision::reference_f64 : Precision::fast, db_rows, head_rows,
                      db_rows);
        }
      }
      accumulate_grad(b, db, true);
    }
  });
  return out;
}

}  // namespace lathe::autograd
