// Launching a CUDA op's kernels from host code written once for the GPU and for the host
// emulation. An op's *_cuda_kernels.cuh holds its kernels as block functions, structs whose
//   __device__ void operator()(unsigned char* shared, Args... args) const
// is one thread's work (shared: the block's dynamic shared memory), and its host steps as
//   template <class Launcher> void run_...(const OpArgs& args, Launcher& launcher)
// which size the grids and call, for each kernel,
//   launcher.launch("op (cuda)", grid, threads, shared_bytes, Body{}, args...);
// and, for a temporary buffer, launcher.scratch(shape, dtype, what); launcher.fill_zero(op, data,
// bytes) clears memory in launch order. Two launchers implement that:
// cuda::DeviceLauncher here (the .cu: a real launch on lathe's stream, its error checked) and
// simt::HostLauncher (device/simt_launcher.h: the same block functions as fibers on the host, the
// op's "cuda_emulated" implementations that the op contract tests check on every machine). So the
// grids, the kernels' choice and their order are the same code on both.
#pragma once

#if !defined(__CUDACC__)
#error "cuda_launcher.cuh launches on a GPU: include it from .cu files (the host emulation: simt_launcher.h)"
#endif

#include <string>

#include "lathe/core/tensor.h"
#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"

namespace lathe::cuda {

// One kernel per (block function, argument types): the block's dynamic shared memory to body.
template <class Body, class... KernelArgs>
__global__ void block_kernel(Body body, KernelArgs... args) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  body(shared_bytes, args...);
}

struct DeviceLauncher {
  template <class Body, class... KernelArgs>
  void launch(const char* op, dim3 grid, unsigned threads, size_t shared_bytes, Body body, KernelArgs... args) {
    block_kernel<Body, KernelArgs...><<<grid, threads, shared_bytes, lathe_stream()>>>(body, args...);
    LATHE_CUDA_CHECK_LAUNCH(op);
  }
  // bytes zero bytes at data, in stream order.
  void fill_zero(const char* op, void* data, size_t bytes) {
    LATHE_CUDA_CHECK(op, cudaMemsetAsync(data, 0, bytes, lathe_stream()));
  }
  // A contiguous device tensor; `what` names it in an out-of-memory error.
  Tensor scratch(const Shape& shape, DType dtype, const std::string& what) { return device_empty(shape, dtype, what); }
};

}  // namespace lathe::cuda
