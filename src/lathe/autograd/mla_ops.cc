#include "lathe/autograd/mla_ops.h"

#include <cstring>
#include <numeric>

#include "lathe/core/error.h"

namespace lathe::autograd {
namespace {

// Copies `rows` rows of `width` elements of `size` bytes between strided row layouts.
void copy_rows(const char* from, int64_t from_stride, char* to, int64_t to_stride, int64_t rows, int64_t width,
               size_t size) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(to + r * to_stride * size, from + r * from_stride * size, static_cast<size_t>(width) * size);
}

Shape with_last(const Shape& shape, int64_t last) {
  Shape out = shape;
  out[out.rank() - 1] = last;
  return out;
}

}  // namespace

std::vector<Var> split_last_dim(Tape& tape, const Var& x, std::span<const int64_t> widths) {
  const Shape shape = x->value.shape();
  const int64_t total = shape[shape.rank() - 1];
  LATHE_CHECK(std::accumulate(widths.begin(), widths.end(), int64_t{0}) == total, "split_last_dim: widths sum to ",
              std::accumulate(widths.begin(), widths.end(), int64_t{0}), ", last dim is ", total);
  const int64_t rows = total > 0 ? x->value.numel() / total : 0;
  const size_t size = dtype_size(x->value.dtype());
  std::vector<Var> pieces;
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (int64_t width : widths) {
    Var piece = make_var(Tensor::empty(with_last(shape, width), x->value.dtype()), x->requires_grad);
    copy_rows(static_cast<const char*>(x->value.view().data) + offset * size, total,
              static_cast<char*>(piece->value.view().data), width, rows, width, size);
    pieces.push_back(piece);
    offsets.push_back(offset);
    offset += width;
  }
  if (!tape.recording() || !x->requires_grad) return pieces;
  tape.record([x, pieces, offsets, rows, total, size] {
    Tensor grad = Tensor::zeros(x->value.shape(), x->value.dtype());
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (!pieces[i]->grad.defined()) continue;
      const int64_t width = pieces[i]->value.shape()[pieces[i]->value.shape().rank() - 1];
      copy_rows(static_cast<const char*>(pieces[i]->grad.view().data), width,
                static_cast<char*>(grad.view().data) + offsets[i] * size, total, rows, width, size);
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
  const size_t size = dtype_size(a->value.dtype());
  Var out = make_var(Tensor::empty(with_last(a_shape, width), a->value.dtype()), a->requires_grad || b->requires_grad);
  const char* a_data = static_cast<const char*>(a->value.view().data);
  const char* b_data = static_cast<const char*>(b->value.view().data);
  char* o = static_cast<char*>(out->value.view().data);
  copy_rows(a_data, wa, o, width, groups * heads, wa, size);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t h = 0; h < heads; ++h)
      std::memcpy(o + ((g * heads + h) * width + wa) * size,
                  b_data + ((g * b_heads + (b_heads == 1 ? 0 : h)) * wb) * size, static_cast<size_t>(wb) * size);
  if (!tape.recording() || !out->requires_grad) return out;
  tape.record([a, b, out, groups, heads, b_heads, wa, wb, width, size] {
    const char* grad = static_cast<const char*>(out->grad.view().data);
    if (a->requires_grad) {
      Tensor da = Tensor::empty(a->value.shape(), a->value.dtype());
      copy_rows(grad, width, static_cast<char*>(da.view().data), wa, groups * heads, wa, size);
      accumulate_grad(a, da, true);
    }
    if (b->requires_grad) {
      Tensor db = Tensor::zeros(b->value.shape(), b->value.dtype());
      auto add_rows = [&](auto* into, const auto* from) {
        for (int64_t g = 0; g < groups; ++g)
          for (int64_t h = 0; h < heads; ++h) {
            auto* row = into + (g * b_heads + (b_heads == 1 ? 0 : h)) * wb;
            const auto* src = from + (g * heads + h) * width + wa;
            for (int64_t i = 0; i < wb; ++i) row[i] += src[i];
          }
      };
      if (b->value.dtype() == DType::f64)
        add_rows(db.ptr<double>(), out->grad.ptr<double>());
      else
        add_rows(db.ptr<float>(), out->grad.ptr<float>());
      accumulate_grad(b, db, true);
    }
  });
  return out;
}

}  // namespace lathe::autograd
