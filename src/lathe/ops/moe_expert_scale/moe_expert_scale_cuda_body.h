// The CUDA kernels of moe_expert_scale and its backward as LATHE_HOST_DEVICE functions, launched by
// moe_expert_scale_cuda.cu (one GPU thread per slot, one per expert for d_scale) and run on the
// host by the CPU kernels and the "cuda_emulated" implementation, so every implementation has the
// same order of operations: d_scale[e] adds its slots' products in slot order.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/ops/moe_expert_scale/moe_expert_scale.h"

namespace lathe::moe_expert_scale_cuda {

struct Tensors {
  const float* weights;       // (slots)
  const float* scale;         // (experts)
  const int32_t* expert_ids;  // (slots)
  int64_t slots;
};

inline Tensors tensors_of(const TensorView& weights, const TensorView& scale, const TensorView& expert_ids) {
  return {static_cast<const float*>(weights.data), static_cast<const float*>(scale.data),
          static_cast<const int32_t*>(expert_ids.data), weights.numel()};
}

// out[slot] (and, in the backward, d_weights[slot] with dy in place of the weights).
LATHE_HOST_DEVICE inline void scale_slot(const float* values, const Tensors& a, int64_t slot, float* out) {
  out[slot] = values[slot] * a.scale[a.expert_ids[slot]];
}

// d_scale[expert]: the slots routed to it, in slot order, each added with one fused multiply-add
// (explicit, so no compiler contracts differently on another ISA or on the GPU).
LATHE_HOST_DEVICE inline void scale_gradient(const Tensors& a, const float* dy, int64_t expert, float* d_scale) {
  float sum = 0.0f;
  for (int64_t slot = 0; slot < a.slots; ++slot)
    if (a.expert_ids[slot] == expert) sum = fmaf(dy[slot], a.weights[slot], sum);
  d_scale[expert] = sum;
}

}  // namespace lathe::moe_expert_scale_cuda
