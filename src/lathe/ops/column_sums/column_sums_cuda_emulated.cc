// column_sums's CUDA kernel run on the host (column_sums_cuda_kernels.cuh under device/simt_launcher.h) as
// "cuda_emulated", registered after the CPU implementations in builds with the CUDA toolkit.
#include "lathe/ops/column_sums/column_sums_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/column_sums/column_sums_cuda_kernels.cuh"

namespace lathe {

std::vector<Impl<ColumnSumsArgs, ColumnSumsConfig>> column_sums_cuda_emulated_impls() {
  return {host_launched_impl<ColumnSumsArgs, ColumnSumsConfig>([](const ColumnSumsArgs& args, auto& launcher) { column_sums_cuda::run(args, launcher); })};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
