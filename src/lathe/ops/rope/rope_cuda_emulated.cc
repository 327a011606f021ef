// rope's CUDA kernel run on the host (rope_cuda_kernels.cuh under device/simt_launcher.h) as
// "cuda_emulated", registered after the CPU implementations in builds with the CUDA toolkit.
#include "lathe/ops/rope/rope_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/rope/rope_cuda_kernels.cuh"

namespace lathe {

std::vector<Impl<RopeArgs, RopeCpuConfig>> rope_cuda_emulated_impls() {
  return {host_launched_impl<RopeArgs, RopeCpuConfig>([](const RopeArgs& args, auto& launcher) { rope_cuda::run_forward(args, launcher); })};
}
std::vector<Impl<RopeBackwardArgs, RopeCpuConfig>> rope_backward_cuda_emulated_impls() {
  return {host_launched_impl<RopeBackwardArgs, RopeCpuConfig>([](const RopeBackwardArgs& args, auto& launcher) { rope_cuda::run_backward(args, launcher); })};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
