// The per-row steps of attention_sinks that every implementation takes (the references in T, the
// CPU kernels, the CUDA kernels and their host emulation): a row is one (batch, head, query), r =
// (b * heads + h) * seq + i in lse's order. Internal linkage (an unnamed namespace): the per-ISA
// kernel files include this header, and one shared inline definition compiled with AVX-512 flags
// could otherwise stand in for the scalar build's at link time.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/core/tensor.h"

namespace lathe::attention_sinks_rows {
namespace {

struct Dims {
  int64_t batch, seq, heads, v_dim;
};

// The dims of o, (batch, seq, heads, v_dim).
inline Dims dims_of(const TensorView& o) { return {o.dim(0), o.dim(1), o.dim(2), o.dim(3)}; }

// Where row r's o values start (o is (batch, seq, heads, v_dim)), and its head.
LATHE_HOST_DEVICE int64_t o_offset(const Dims& d, int64_t r) {
  const int64_t i = r % d.seq, bh = r / d.seq;
  return ((bh / d.heads * d.seq + i) * d.heads + bh % d.heads) * d.v_dim;
}
LATHE_HOST_DEVICE int64_t head_of(const Dims& d, int64_t r) { return r / d.seq % d.heads; }

// lse_out[r] = logaddexp(lse[r], sink) and o_out's row = o's row * exp(lse[r] - lse_out[r]).
template <class T>
LATHE_HOST_DEVICE void fold_row(const T* o, const T* lse, const T* sinks, const Dims& d, int64_t r, T* o_out,
                                T* lse_out) {
  using std::exp;
  using std::log;
  const T l = lse[r], s = sinks[head_of(d, r)];
  const T m = l < s ? s : l;  // l may be -inf (no visible key); s is finite
  const T combined = m + log(exp(l - m) + exp(s - m));
  const T factor = exp(l - combined);
  const int64_t at = o_offset(d, r);
  for (int64_t k = 0; k < d.v_dim; ++k) o_out[at + k] = o[at + k] * factor;
  lse_out[r] = combined;
}

// Row r's term of its head's sink gradient, in double: exp(sink - lse[r]) * sum_k d_o * o.
template <class T>
LATHE_HOST_DEVICE double row_term(const T* o, const T* d_o, const T* lse, const T* sinks, const Dims& d, int64_t r) {
  const int64_t at = o_offset(d, r);
  double dot = 0;
  for (int64_t k = 0; k < d.v_dim; ++k) dot += static_cast<double>(d_o[at + k]) * static_cast<double>(o[at + k]);
  return std::exp(static_cast<double>(sinks[head_of(d, r)]) - static_cast<double>(lse[r])) * dot;
}

// d_sinks[h] = -(the terms of head h's rows, summed in (batch, query) order).
template <class T>
LATHE_HOST_DEVICE void head_gradient(const double* terms, const Dims& d, int64_t h, T* d_sinks) {
  double total = 0;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t i = 0; i < d.seq; ++i) total += terms[(b * d.heads + h) * d.seq + i];
  d_sinks[h] = static_cast<T>(-total);
}

}  // namespace
}  // namespace lathe::attention_sinks_rows
