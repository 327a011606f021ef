// linear_cross_entropy's CUDA implementation: the kernels and host steps of
// linear_cross_entropy_cuda_kernels.cuh, launched on the GPU.
#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy_cuda.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy_cuda_kernels.cuh"

namespace lathe {

Impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig> linear_cross_entropy_cuda_impl() {
  return cuda_launched_impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig>(
      [](const LinearCrossEntropyArgs& args, auto& launcher) { linear_cross_entropy_cuda::run(args, launcher); });
}

}  // namespace lathe
