// softmax's CUDA kernels run on the host (softmax_cuda_kernels.cuh under device/simt_launcher.h):
// "cuda_emulated" launches the kernels the GPU launches for the row's width, "cuda_loop_emulated"
// the loop kernels at any width (the GPU's for rows over 8192 elements, one edge shape: this runs
// them on every shape). Registered after the CPU implementations in builds with the CUDA toolkit.
#include "lathe/ops/softmax/softmax_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/softmax/softmax_cuda_kernels.cuh"

namespace lathe {

std::vector<Impl<SoftmaxArgs, SoftmaxCpuConfig>> softmax_cuda_emulated_impls() {
  return host_launched_row_impls<SoftmaxArgs, SoftmaxCpuConfig>(
      [](const SoftmaxArgs& args, auto& launcher, cuda::RowKernels kernels) {
        softmax_cuda::run_forward(args, launcher, kernels);
      });
}
std::vector<Impl<SoftmaxBackwardArgs, SoftmaxCpuConfig>> softmax_backward_cuda_emulated_impls() {
  return host_launched_row_impls<SoftmaxBackwardArgs, SoftmaxCpuConfig>(
      [](const SoftmaxBackwardArgs& args, auto& launcher, cuda::RowKernels kernels) {
        softmax_cuda::run_backward(args, launcher, kernels);
      });
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
