// gated_activation's CUDA implementations: the kernels and host steps of gated_activation_cuda_kernels.cuh, launched on
// the GPU.
#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/gated_activation/gated_activation_cuda.h"
#include "lathe/ops/gated_activation/gated_activation_cuda_kernels.cuh"

namespace lathe {

Impl<GatedActivationArgs, GatedActivationCpuConfig> gated_activation_cuda_impl() {
  return cuda_launched_impl<GatedActivationArgs, GatedActivationCpuConfig>(
      [](const GatedActivationArgs& args, auto& launcher) { gated_activation_cuda::run_forward(args, launcher); });
}
Impl<GatedActivationBackwardArgs, GatedActivationCpuConfig> gated_activation_backward_cuda_impl() {
  return cuda_launched_impl<GatedActivationBackwardArgs, GatedActivationCpuConfig>(
      [](const GatedActivationBackwardArgs& args, auto& launcher) {
        gated_activation_cuda::run_backward(args, launcher);
      });
}

}  // namespace lathe
