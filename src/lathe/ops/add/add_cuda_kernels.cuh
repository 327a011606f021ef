// add's CUDA kernel and the host step that launches it, shared by the GPU (add_cuda.cu,
// cuda::DeviceLauncher) and the host emulation (add_cuda_emulated.cc, simt::HostLauncher); see
// device/cuda_launcher.cuh. A thread per element (grid-stride): out = a + alpha * b as one fused
// multiply-add (the CPU kernels' rounding), or alpha * b where a is absent.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/add/add.h"

namespace lathe::add_cuda {

constexpr int kThreads = 256;

struct AddElements {
  __device__ void operator()(unsigned char*, const void* a, const void* b, void* out, int64_t n, float alpha,
                             bool bf16) const {
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
      cuda::store_f32(
          out, i,
          a ? fmaf(alpha, cuda::load_f32(b, i, bf16), cuda::load_f32(a, i, bf16)) : alpha * cuda::load_f32(b, i, bf16),
          bf16);
  }
};

template <class Launcher>
void run(const AddArgs& args, Launcher& launcher) {
  const int64_t n = args.b.numel();
  if (n == 0) return;
  launcher.launch("add (cuda)", dim3(cuda::grid_stride_blocks(n, kThreads)), kThreads, 0, AddElements{},
                  static_cast<const void*>(args.a.data), static_cast<const void*>(args.b.data), args.out.data, n,
                  args.alpha, args.b.dtype == DType::bf16);
}

}  // namespace lathe::add_cuda
