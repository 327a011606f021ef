// The CUDA kernels of clamped_swiglu and its backward as LATHE_HOST_DEVICE functions: one GPU
// thread per output element j (row-major over (rows, ffn): gate_up's columns 2j and 2j + 1 of the
// same flat index), launched by clamped_swiglu_cuda.cu and run on the host by the "cuda_emulated"
// implementation.
#pragma once

#include <cstdint>

#include "lathe/ops/clamped_swiglu/clamped_swiglu_math.h"

namespace lathe::clamped_swiglu_cuda {
namespace {  // internal linkage, as clamped_swiglu_math.h

LATHE_HOST_DEVICE void forward_element(const float* gate_up, int64_t j, float alpha, float limit, float* out) {
  out[j] = clamped_swiglu_math::forward<float>(gate_up[2 * j], gate_up[2 * j + 1], alpha, limit);
}

LATHE_HOST_DEVICE void backward_element(const float* gate_up, const float* dy, int64_t j, float alpha, float limit,
                                        float* d_gate_up) {
  clamped_swiglu_math::backward<float>(gate_up[2 * j], gate_up[2 * j + 1], dy[j], alpha, limit, &d_gate_up[2 * j],
                                       &d_gate_up[2 * j + 1]);
}

}  // namespace
}  // namespace lathe::clamped_swiglu_cuda
