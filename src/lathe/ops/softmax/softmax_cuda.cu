// softmax's CUDA implementations: the kernels and host steps of softmax_cuda_kernels.cuh, launched on the GPU.
#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/softmax/softmax_cuda.h"
#include "lathe/ops/softmax/softmax_cuda_kernels.cuh"

namespace lathe {

Impl<SoftmaxArgs, SoftmaxCpuConfig> softmax_cuda_impl() {
  return cuda_launched_impl<SoftmaxArgs, SoftmaxCpuConfig>(
      [](const SoftmaxArgs& args, auto& launcher) { softmax_cuda::run_forward(args, launcher); });
}
Impl<SoftmaxBackwardArgs, SoftmaxCpuConfig> softmax_backward_cuda_impl() {
  return cuda_launched_impl<SoftmaxBackwardArgs, SoftmaxCpuConfig>(
      [](const SoftmaxBackwardArgs& args, auto& launcher) { softmax_cuda::run_backward(args, launcher); });
}

}  // namespace lathe
