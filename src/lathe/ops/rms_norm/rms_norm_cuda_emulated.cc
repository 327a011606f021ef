// rms_norm's CUDA kernels run on the host (rms_norm_cuda_kernels.cuh under device/simt_launcher.h):
// "cuda_emulated" launches the kernels the GPU launches for the row's width, "cuda_loop_emulated"
// the loop kernels at any width (the GPU's for rows over 8192 elements, two edge shapes: this runs
// them on every shape). Registered after the CPU implementations in builds with the CUDA toolkit.
#include "lathe/ops/rms_norm/rms_norm_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/rms_norm/rms_norm_cuda_kernels.cuh"

namespace lathe {

std::vector<Impl<RmsNormArgs, RmsNormCpuConfig>> rms_norm_cuda_emulated_impls() {
  return host_launched_row_impls<RmsNormArgs, RmsNormCpuConfig>(
      [](const RmsNormArgs& args, auto& launcher, cuda::RowKernels kernels) {
        rms_norm_cuda::run_forward(args, launcher, kernels);
      });
}
std::vector<Impl<RmsNormBackwardArgs, RmsNormCpuConfig>> rms_norm_backward_cuda_emulated_impls() {
  return host_launched_row_impls<RmsNormBackwardArgs, RmsNormCpuConfig>(
      [](const RmsNormBackwardArgs& args, auto& launcher, cuda::RowKernels kernels) {
        rms_norm_cuda::run_backward(args, launcher, kernels);
      });
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
