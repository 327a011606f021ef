#include <algorithm>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/add/add_cuda.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

__global__ void add_elements(const void* a, const void* b, void* out, int64_t n, float alpha, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    cuda::store_f32(
        out, i,
        a ? fmaf(alpha, cuda::load_f32(b, i, bf16), cuda::load_f32(a, i, bf16)) : alpha * cuda::load_f32(b, i, bf16),
        bf16);
}

void run(const AddArgs& args, const AddCpuConfig&) {
  const int64_t n = args.b.numel();
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 16);
  add_elements<<<static_cast<unsigned>(blocks), kThreads, 0, cuda::lathe_stream()>>>(
      args.a.data, args.b.data, args.out.data, n, args.alpha, args.b.dtype == DType::bf16);
  LATHE_CUDA_CHECK_LAUNCH("add (cuda)");
}

}  // namespace

Impl<AddArgs, AddCpuConfig> add_cuda_impl() { return default_config_cuda_impl<AddArgs, AddCpuConfig>(run); }

}  // namespace lathe
