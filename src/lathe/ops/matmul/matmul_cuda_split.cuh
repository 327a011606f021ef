// The split of an f32 tensor into kBf16Parts bf16 tensors (matmul_cuda.h) as a block function
// (device/cuda_launcher.cuh), shared by matmul's backward (matmul_cuda_kernels.cuh), the fused head's
// steps (linear_cross_entropy_cuda_kernels.cuh) and their host emulation.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/matmul/matmul_cuda.h"

namespace lathe::matmul_cuda {

// A thread per element (grid-stride): parts[p * count + i], p = 0 bf16(x[i]), each next part bf16
// of what the earlier ones leave.
struct SplitBf16x3 {
  __device__ void operator()(unsigned char*, const float* x, int64_t count, __nv_bfloat16* parts) const {
    for (int64_t flat = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; flat < count;
         flat += int64_t{gridDim.x} * blockDim.x) {
      float rest = x[flat];
      for (int part = 0; part < kBf16Parts; ++part) {
        const __nv_bfloat16 rounded = __float2bfloat16_rn(rest);
        parts[part * count + flat] = rounded;
        rest -= __bfloat162float(rounded);
      }
    }
  }
};

}  // namespace lathe::matmul_cuda
