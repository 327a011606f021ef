// rope's CUDA implementations: the kernel and host steps of rope_cuda_kernels.cuh,
// launched on the GPU.
#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/rope/rope_cuda.h"
#include "lathe/ops/rope/rope_cuda_kernels.cuh"

namespace lathe {

Impl<RopeArgs, RopeCpuConfig> rope_cuda_impl() {
  return cuda_launched_impl<RopeArgs, RopeCpuConfig>(
      [](const RopeArgs& args, auto& launcher) { rope_cuda::run_forward(args, launcher); });
}
Impl<RopeBackwardArgs, RopeCpuConfig> rope_backward_cuda_impl() {
  return cuda_launched_impl<RopeBackwardArgs, RopeCpuConfig>(
      [](const RopeBackwardArgs& args, auto& launcher) { rope_cuda::run_backward(args, launcher); });
}

}  // namespace lathe
