// The CUDA kernels of moe_combine and moe_combine_backward as LATHE_HOST_DEVICE functions, one GPU
// thread per output element, launched by moe_combine_cuda.cu and run on the host by the
// "cuda_emulated" implementation (ops/cuda_emulated_impl.h). The order of operations is the
// header's (moe_combine.h): y's value (with accumulate) first, then k ascending; a d_weights dot
// product over the columns in order.
#pragma once

#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/ops/moe_combine/moe_combine.h"

namespace lathe::moe_combine_cuda {

struct Tensors {
  const float* expert_out;     // (tokens * top_k, n)
  const float* weights;        // (tokens, top_k)
  const int32_t* destination;  // (tokens * top_k)
  int64_t top_k, n;
};

inline Tensors tensors_of(const TensorView& expert_out, const TensorView& weights, const TensorView& destination) {
  return {static_cast<const float*>(expert_out.data), static_cast<const float*>(weights.data),
          static_cast<const int32_t*>(destination.data), weights.dim(1), expert_out.dim(1)};
}

// Element i of y (token i / n).
LATHE_HOST_DEVICE inline void combine_element(const Tensors& a, bool accumulate, int64_t i, float* y) {
  const int64_t t = i / a.n, column = i - t * a.n;
  float sum = accumulate ? y[i] : 0.0f;
  for (int64_t k = 0; k < a.top_k; ++k) {
    const int64_t slot = t * a.top_k + k;
    sum += a.weights[slot] * a.expert_out[a.destination[slot] * a.n + column];
  }
  y[i] = sum;
}

// Element i of d_expert_out, indexed by slot (slot i / n writes row destination[slot]).
LATHE_HOST_DEVICE inline void expert_gradient_element(const Tensors& a, const float* dy, int64_t i,
                                                      float* d_expert_out) {
  const int64_t slot = i / a.n, column = i - slot * a.n, t = slot / a.top_k;
  d_expert_out[a.destination[slot] * a.n + column] = a.weights[slot] * dy[t * a.n + column];
}

// d_weights[slot] = dy[t] . expert_out[destination[slot]].
LATHE_HOST_DEVICE inline void weight_gradient(const Tensors& a, const float* dy, int64_t slot, float* d_weights) {
  const float* row = a.expert_out + a.destination[slot] * a.n;
  const float* g = dy + (slot / a.top_k) * a.n;
  float dot = 0.0f;
  for (int64_t c = 0; c < a.n; ++c) dot += g[c] * row[c];
  d_weights[slot] = dot;
}

}  // namespace lathe::moe_combine_cuda
