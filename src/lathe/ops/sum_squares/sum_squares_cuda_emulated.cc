// sum_squares's CUDA kernels run on the host (sum_squares_cuda_kernels.cuh under device/simt_launcher.h) as
// "cuda_emulated", registered after the CPU implementations in builds with the CUDA toolkit.
#include "lathe/ops/sum_squares/sum_squares_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/sum_squares/sum_squares_cuda_kernels.cuh"

namespace lathe {

std::vector<Impl<SumSquaresArgs, SumSquaresConfig>> sum_squares_cuda_emulated_impls() {
  return {host_launched_impl<SumSquaresArgs, SumSquaresConfig>([](const SumSquaresArgs& args, auto& launcher) { sum_squares_cuda::run(args, launcher); })};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
