// cast's CUDA implementation: the kernels and host steps of cast_cuda_kernels.cuh, launched on the GPU.
#include "lathe/ops/cast/cast_cuda.h"
#include "lathe/ops/cast/cast_cuda_kernels.cuh"
#include "lathe/ops/cuda_launched_impl.h"

namespace lathe {

Impl<CastArgs, CastCpuConfig> cast_cuda_impl() {
  return cuda_launched_impl<CastArgs, CastCpuConfig>(
      [](const CastArgs& args, auto& launcher) { cast_cuda::run(args, launcher); });
}

}  // namespace lathe
