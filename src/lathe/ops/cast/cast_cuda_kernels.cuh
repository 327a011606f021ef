// cast's CUDA kernel and the host step that launches it, shared by the GPU (cast_cuda.cu,
// cuda::DeviceLauncher) and the host emulation (cast_cuda_emulated.cc, simt::HostLauncher); see
// device/cuda_launcher.cuh. A thread per element (grid-stride), f32 <-> bf16 rounding to nearest
// even as the host's conversion does.
#pragma once

#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/cast/cast.h"

namespace lathe::cast_cuda {

constexpr int kThreads = 256;

struct CastElements {
  __device__ void operator()(unsigned char*, const void* in, void* out, int64_t n, bool in_bf16, bool out_bf16) const {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
      cuda::store_f32(out, i, cuda::load_f32(in, i, in_bf16), out_bf16);
  }
};

template <class Launcher>
void run(const CastArgs& args, Launcher& launcher) {
  const int64_t n = args.in.numel();
  if (n == 0) return;
  launcher.launch("cast (cuda)", dim3(cuda::grid_stride_blocks(n, kThreads)), kThreads, 0, CastElements{},
                  static_cast<const void*>(args.in.data), args.out.data, n, args.in.dtype == DType::bf16,
                  args.out.dtype == DType::bf16);
}

}  // namespace lathe::cast_cuda
