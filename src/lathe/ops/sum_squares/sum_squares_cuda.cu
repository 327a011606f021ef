// sum_squares's CUDA implementation: the kernels and host steps of sum_squares_cuda_kernels.cuh,
// launched on the GPU.
#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/sum_squares/sum_squares_cuda.h"
#include "lathe/ops/sum_squares/sum_squares_cuda_kernels.cuh"

namespace lathe {

Impl<SumSquaresArgs, SumSquaresConfig> sum_squares_cuda_impl() {
  return cuda_launched_impl<SumSquaresArgs, SumSquaresConfig>(
      [](const SumSquaresArgs& args, auto& launcher) { sum_squares_cuda::run(args, launcher); });
}

}  // namespace lathe
