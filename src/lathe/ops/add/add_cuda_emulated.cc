// add's CUDA kernel run on the host (add_cuda_kernels.cuh under device/simt_launcher.h) as
// "cuda_emulated", registered after the CPU implementations in builds with the CUDA toolkit.
#include "lathe/ops/add/add_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/add/add_cuda_kernels.cuh"
#include "lathe/ops/cuda_launched_impl.h"

namespace lathe {

std::vector<Impl<AddArgs, AddCpuConfig>> add_cuda_emulated_impls() {
  return {host_launched_impl<AddArgs, AddCpuConfig>(
      [](const AddArgs& args, auto& launcher) { add_cuda::run(args, launcher); })};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
