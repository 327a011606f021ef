// cast's CUDA kernel run on the host (cast_cuda_kernels.cuh under device/simt_launcher.h) as
// "cuda_emulated", registered after the CPU implementations in builds with the CUDA toolkit.
#include "lathe/ops/cast/cast_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/cast/cast_cuda_kernels.cuh"
#include "lathe/ops/cuda_launched_impl.h"

namespace lathe {

std::vector<Impl<CastArgs, CastCpuConfig>> cast_cuda_emulated_impls() {
  return {host_launched_impl<CastArgs, CastCpuConfig>(
      [](const CastArgs& args, auto& launcher) { cast_cuda::run(args, launcher); })};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
