// Plain reference building blocks shared by the suite's compositions, templated on the computing
// type (double: the oracle; float: the naive same-precision baseline). Where an op exists, its own
// reference does the work (matmul, attention here; softmax and the norms in the fusion chains): the
// suite restates no op. Only the outermost independent loop runs in parallel, so the float
// reference is a fair "plain loops on all cores" baseline for the speedup column.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "lathe/core/parallel.h"
#include "lathe/core/tensor.h"
#include "lathe/ops/flash_attention/flash_attention.h"
#include "lathe/ops/matmul/matmul.h"

namespace lathe::suite_reference {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
template <class T>
T silu(T x) {
  return x * sigmoid(x);
}
template <class T>
T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}
template <class T>
T mish(T x) {
  return x * std::tanh(softplus(x));
}
template <class T>
T gelu_tanh(T x) {
  const T c = T(0.7978845608028654);  // sqrt(2 / pi)
  return T(0.5) * x * (T(1) + std::tanh(c * (x + T(0.044715) * x * x * x)));
}
template <class T>
T gelu_erf(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476)));
}
template <class T>
T hardswish(T x) {
  return x * std::clamp(x + T(3), T(0), T(6)) / T(6);
}

// T values (double or float) viewed as a contiguous tensor of that dtype, for the ops' references.
template <class T>
TensorView view_of(const T* data, const Shape& shape) {
  return TensorView{const_cast<T*>(data), shape, contiguous_strides(shape), dtype_of<T>()};
}

// c (m, n) = a (m, k) @ b, with b (k, n), or b (n, k) read transposed when b_transposed: the matmul
// op's reference on blocks of rows in parallel (b is laid out as (n, k) first, so its reads run
// along rows).
template <class T>
void matmul(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool b_transposed) {
  std::vector<T> transposed;
  if (!b_transposed) {
    transposed.resize(static_cast<size_t>(k * n));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) transposed[j * k + p] = b[p * n + j];
    b = transposed.data();
  }
  parallel_for(m, 8, [&](int64_t begin, int64_t end) {
    MatmulArgs args;
    args.a = view_of(a + begin * k, {end - begin, k});
    args.b = view_of(b, {n, k});
    args.c = view_of(c + begin * n, {end - begin, n});
    args.trans_b = true;
    matmul_reference<T>(args);
  });
}

// Softmax attention over (batch, seq, heads, dim) layouts: flash_attention's reference, one
// (batch, head) at a time in parallel. q (batch, seq_q, heads, dim_qk), k (batch, seq_k, kv_heads,
// dim_qk), v (batch, seq_k, kv_heads, dim_v) -> o (batch, seq_q, heads, dim_v); causal is
// bottom-right aligned. A v narrower than q and k (MLA) is zero-padded to their width, which
// leaves the first dim_v outputs unchanged.
template <class T>
void attention(const T* q, const T* k, const T* v, T* o, int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads,
               int64_t kv_heads, int64_t dim_qk, int64_t dim_v, T scale, bool causal) {
  std::vector<T> padded;
  if (dim_v != dim_qk) {
    padded.assign(static_cast<size_t>(batch * seq_k * kv_heads * dim_qk), T(0));
    for (int64_t row = 0; row < batch * seq_k * kv_heads; ++row)
      std::copy(v + row * dim_v, v + (row + 1) * dim_v, padded.begin() + row * dim_qk);
    v = padded.data();
  }
  int64_t group = heads / kv_heads;
  parallel_for(batch * heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> head_o(static_cast<size_t>(seq_q * dim_qk)), lse(static_cast<size_t>(seq_q));
    for (int64_t bh = begin; bh < end; ++bh) {
      int64_t b = bh / heads, h = bh % heads, kvh = h / group;
      auto head = [&](const T* base, int64_t seq, int64_t count, int64_t index) {  // (1, seq, 1, dim_qk)
        return TensorView{const_cast<T*>(base + (b * seq * count + index) * dim_qk), Shape{1, seq, 1, dim_qk},
                          Shape{seq * count * dim_qk, count * dim_qk, dim_qk, 1}, dtype_of<T>()};
      };
      FlashAttentionArgs args;
      args.q = head(q, seq_q, heads, h);
      args.k = head(k, seq_k, kv_heads, kvh);
      args.v = head(v, seq_k, kv_heads, kvh);
      args.o = view_of(head_o.data(), {1, seq_q, 1, dim_qk});
      args.lse = view_of(lse.data(), {1, 1, seq_q});
      args.options.scale = static_cast<float>(scale);
      args.options.causal = causal;
      flash_attention_reference<T>(args);
      for (int64_t i = 0; i < seq_q; ++i)
        std::copy(&head_o[i * dim_qk], &head_o[i * dim_qk] + dim_v, o + ((b * seq_q + i) * heads + h) * dim_v);
    }
  });
}

}  // namespace lathe::suite_reference
