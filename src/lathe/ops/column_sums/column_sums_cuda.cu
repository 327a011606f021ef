// column_sums's CUDA implementation: the kernel and host step of column_sums_cuda_kernels.cuh,
// launched on the GPU.
#include "lathe/ops/column_sums/column_sums_cuda.h"
#include "lathe/ops/column_sums/column_sums_cuda_kernels.cuh"
#include "lathe/ops/cuda_launched_impl.h"

namespace lathe {

Impl<ColumnSumsArgs, ColumnSumsConfig> column_sums_cuda_impl() {
  return cuda_launched_impl<ColumnSumsArgs, ColumnSumsConfig>(
      [](const ColumnSumsArgs& args, auto& launcher) { column_sums_cuda::run(args, launcher); });
}

}  // namespace lathe
