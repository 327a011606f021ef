// gated_activation's CUDA kernels run on the host (gated_activation_cuda_kernels.cuh under
// device/simt_launcher.h) as "cuda_emulated", registered after the CPU implementations in builds
// with the CUDA toolkit.
#include "lathe/ops/gated_activation/gated_activation_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/gated_activation/gated_activation_cuda_kernels.cuh"

namespace lathe {

std::vector<Impl<GatedActivationArgs, GatedActivationCpuConfig>> gated_activation_cuda_emulated_impls() {
  return {host_launched_impl<GatedActivationArgs, GatedActivationCpuConfig>(
      [](const GatedActivationArgs& args, auto& launcher) { gated_activation_cuda::run_forward(args, launcher); })};
}
std::vector<Impl<GatedActivationBackwardArgs, GatedActivationCpuConfig>>
gated_activation_backward_cuda_emulated_impls() {
  return {host_launched_impl<GatedActivationBackwardArgs, GatedActivationCpuConfig>(
      [](const GatedActivationBackwardArgs& args, auto& launcher) {
        gated_activation_cuda::run_backward(args, launcher);
      })};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
