// rms_norm's CUDA implementations: the kernels and host steps of rms_norm_cuda_kernels.cuh, launched on the GPU.
#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/rms_norm/rms_norm_cuda.h"
#include "lathe/ops/rms_norm/rms_norm_cuda_kernels.cuh"

namespace lathe {

Impl<RmsNormArgs, RmsNormCpuConfig> rms_norm_cuda_impl() {
  return cuda_launched_impl<RmsNormArgs, RmsNormCpuConfig>(
      [](const RmsNormArgs& args, auto& launcher) { rms_norm_cuda::run_forward(args, launcher); });
}
Impl<RmsNormBackwardArgs, RmsNormCpuConfig> rms_norm_backward_cuda_impl() {
  return cuda_launched_impl<RmsNormBackwardArgs, RmsNormCpuConfig>(
      [](const RmsNormBackwardArgs& args, auto& launcher) { rms_norm_cuda::run_backward(args, launcher); });
}

}  // namespace lathe
