#include <algorithm>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/adamw/adamw_cuda.h"
#include "lathe/ops/adamw/adamw_cuda_body.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535 * 16;  // grid-stride beyond this

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

__global__ void adamw_update(adamw_cuda::Tensors t, adamw_cuda::Coefficients c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < t.n; i += int64_t{gridDim.x} * blockDim.x)
    adamw_cuda::update_element(t, c, i);
}

// Block row y updates tensor y of the batch; the row's blocks stride over its elements.
__global__ void adamw_update_batch(adamw_cuda::Batch batch) {
  const adamw_cuda::Tensors& t = batch.tensors[blockIdx.y];
  const adamw_cuda::Coefficients& c = batch.coefficients[blockIdx.y];
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < t.n; i += int64_t{gridDim.x} * blockDim.x)
    adamw_cuda::update_element(t, c, i);
}

void run(const AdamWArgs& args, const AdamWCpuConfig&) {
  const int64_t n = args.param.numel();
  if (n == 0) return;
  adamw_update<<<blocks_for(n), kThreads, 0, cuda::lathe_stream()>>>(adamw_cuda::tensors_of(args),
                                                                     adamw_cuda::coefficients_of(args));
  LATHE_CUDA_CHECK_LAUNCH("adamw (cuda)");
}

}  // namespace

Impl<AdamWArgs, AdamWCpuConfig> adamw_cuda_impl() { return default_config_cuda_impl<AdamWArgs, AdamWCpuConfig>(run); }

void adamw_cuda_many(const std::vector<AdamWArgs>& steps) {
  for (const adamw_cuda::Batch& batch : adamw_cuda::batches_of(steps)) {
    const dim3 grid(blocks_for(batch.largest), static_cast<unsigned>(batch.count));
    adamw_update_batch<<<grid, kThreads, 0, cuda::lathe_stream()>>>(batch);
    LATHE_CUDA_CHECK_LAUNCH("adamw_many (cuda)");
  }
}

}  // namespace lathe
