// Plain reference building blocks shared by the suite's problems, templated on the computing type
// (double: the oracle; float: the naive same-precision baseline). Written to be obviously right;
// only the outermost independent loop runs in parallel, so the float reference is a fair "plain
// loops on all cores" baseline for the speedup column.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "lathe/core/parallel.h"

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

// c (m, n) = a (m, k) @ b, with b (k, n), or b (n, k) read transposed when b_transposed.
template <class T>
void matmul(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool b_transposed) {
  std::vector<T> transposed;
  if (b_transposed) {  // into (k, n), so the inner loop below runs over contiguous rows
    transposed.resize(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) transposed[p * n + j] = b[j * k + p];
    b = transposed.data();
  }
  parallel_for(m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      T* row = c + i * n;
      std::fill(row, row + n, T(0));
      for (int64_t p = 0; p < k; ++p) {
        T scale = a[i * k + p];
        for (int64_t j = 0; j < n; ++j) row[j] += scale * b[p * n + j];
      }
    }
  });
}

// Softmax attention over (batch, seq, heads, dim) layouts, one score row at a time:
// q (batch, seq_q, heads, dim_qk), k (batch, seq_k, kv_heads, dim_qk), v (batch, seq_k, kv_heads,
// dim_v) -> o (batch, seq_q, heads, dim_v). Query i sees key j when (not causal or j <= i +
// seq_k - seq_q) and (window == 0 or j > i + seq_k - seq_q - window). softcap > 0 caps logits.
template <class T>
void attention(const T* q, const T* k, const T* v, T* o, int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads,
               int64_t kv_heads, int64_t dim_qk, int64_t dim_v, T scale, bool causal, int64_t window = 0,
               T softcap = 0) {
  int64_t group = heads / kv_heads;
  parallel_for(batch * heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> scores(static_cast<size_t>(seq_k));
    for (int64_t bh = begin; bh < end; ++bh) {
      int64_t b = bh / heads, h = bh % heads, kvh = h / group;
      for (int64_t i = 0; i < seq_q; ++i) {
        const T* qi = q + ((b * seq_q + i) * heads + h) * dim_qk;
        int64_t aligned = i + seq_k - seq_q;
        int64_t first = window > 0 ? std::max<int64_t>(0, aligned - window + 1) : 0;
        int64_t last = causal ? std::min(aligned, seq_k - 1) : seq_k - 1;
        T* oi = o + ((b * seq_q + i) * heads + h) * dim_v;
        std::fill(oi, oi + dim_v, T(0));
        if (last < first) continue;
        T max_score = -std::numeric_limits<T>::infinity();
        for (int64_t j = first; j <= last; ++j) {
          const T* kj = k + ((b * seq_k + j) * kv_heads + kvh) * dim_qk;
          T s = 0;
          for (int64_t d = 0; d < dim_qk; ++d) s += qi[d] * kj[d];
          s *= scale;
          if (softcap > 0) s = softcap * std::tanh(s / softcap);
          scores[j] = s;
          max_score = std::max(max_score, s);
        }
        T total = 0;
        for (int64_t j = first; j <= last; ++j) total += scores[j] = std::exp(scores[j] - max_score);
        for (int64_t j = first; j <= last; ++j) {
          const T* vj = v + ((b * seq_k + j) * kv_heads + kvh) * dim_v;
          T p = scores[j] / total;
          for (int64_t d = 0; d < dim_v; ++d) oi[d] += p * vj[d];
        }
      }
    }
  });
}

}  // namespace lathe::suite_reference
