#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/column_sums/column_sums_cuda.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

__global__ void sums(const float* x, int64_t rows, int64_t cols, float* out, bool accumulate) {
  const int64_t j = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (j >= cols) return;
  double sum = 0;
  for (int64_t i = 0; i < rows; ++i) sum += x[i * cols + j];
  const float rounded = static_cast<float>(sum);
  out[j] = accumulate ? out[j] + rounded : rounded;
}

void run(const ColumnSumsArgs& args, const ColumnSumsConfig&) {
  const int64_t rows = args.x.dim(0), cols = args.x.dim(1);
  if (cols == 0) return;
  const auto blocks = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
  sums<<<blocks, kThreads, 0, cuda::lathe_stream()>>>(static_cast<const float*>(args.x.data), rows, cols,
                                                      static_cast<float*>(args.out.data), args.accumulate);
  LATHE_CUDA_CHECK_LAUNCH("column_sums (cuda)");
}

}  // namespace

Impl<ColumnSumsArgs, ColumnSumsConfig> column_sums_cuda_impl() {
  return default_config_cuda_impl<ColumnSumsArgs, ColumnSumsConfig>(run);
}

}  // namespace lathe
