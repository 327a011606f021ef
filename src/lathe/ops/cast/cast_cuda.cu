#include <algorithm>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/cast/cast_cuda.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

__global__ void cast_elements(const void* in, void* out, int64_t n, bool in_bf16, bool out_bf16) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    cuda::store_f32(out, i, cuda::load_f32(in, i, in_bf16), out_bf16);
}

void run(const CastArgs& args, const CastCpuConfig&) {
  const int64_t n = args.in.numel();
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 16);
  cast_elements<<<static_cast<unsigned>(blocks), kThreads, 0, cuda::lathe_stream()>>>(
      args.in.data, args.out.data, n, args.in.dtype == DType::bf16, args.out.dtype == DType::bf16);
  LATHE_CUDA_CHECK_LAUNCH("cast (cuda)");
}

}  // namespace

Impl<CastArgs, CastCpuConfig> cast_cuda_impl() { return default_config_cuda_impl<CastArgs, CastCpuConfig>(run); }

}  // namespace lathe
