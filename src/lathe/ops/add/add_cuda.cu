// add's CUDA implementation: the kernels and host steps of add_cuda_kernels.cuh, launched on the GPU.
#include "lathe/ops/add/add_cuda.h"
#include "lathe/ops/add/add_cuda_kernels.cuh"
#include "lathe/ops/cuda_launched_impl.h"

namespace lathe {

Impl<AddArgs, AddCpuConfig> add_cuda_impl() {
  return cuda_launched_impl<AddArgs, AddCpuConfig>(
      [](const AddArgs& args, auto& launcher) { add_cuda::run(args, launcher); });
}

}  // namespace lathe
