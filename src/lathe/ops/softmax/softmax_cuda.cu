#include <cmath>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/softmax/softmax_cuda.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

__global__ void softmax_forward(const void* x, void* y, int64_t cols, float scale, bool bf16) {
  __shared__ float scratch[kThreads / cuda::kWarp];
  const int64_t base = blockIdx.x * cols;
  float row_max = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) row_max = fmaxf(row_max, cuda::load_f32(x, base + c, bf16));
  row_max = cuda::block_reduce(row_max, scratch, cuda::Max{});
  if (row_max == -INFINITY) {  // fully masked row
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) cuda::store_f32(y, base + c, 0.0f, bf16);
    return;
  }
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    sum += expf(scale * (cuda::load_f32(x, base + c, bf16) - row_max));
  sum = cuda::block_reduce(sum, scratch, cuda::Sum{});
  const float inverse = 1.0f / sum;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    cuda::store_f32(y, base + c, expf(scale * (cuda::load_f32(x, base + c, bf16) - row_max)) * inverse, bf16);
}

__global__ void softmax_backward(const void* y, const void* dy, void* dx, int64_t cols, float scale, bool bf16) {
  __shared__ float scratch[kThreads / cuda::kWarp];
  const int64_t base = blockIdx.x * cols;
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dot += cuda::load_f32(dy, base + c, bf16) * cuda::load_f32(y, base + c, bf16);
  dot = cuda::block_reduce(dot, scratch, cuda::Sum{});
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    cuda::store_f32(dx, base + c,
                    scale * cuda::load_f32(y, base + c, bf16) * (cuda::load_f32(dy, base + c, bf16) - dot), bf16);
}

void run_forward(const SoftmaxArgs& args, const SoftmaxCpuConfig&) {
  if (args.x.dim(0) == 0) return;
  softmax_forward<<<static_cast<unsigned>(args.x.dim(0)), kThreads, 0, cuda::lathe_stream()>>>(
      args.x.data, args.y.data, args.x.dim(1), args.scale, args.x.dtype == DType::bf16);
  LATHE_CUDA_CHECK_LAUNCH("softmax (cuda)");
}

void run_backward(const SoftmaxBackwardArgs& args, const SoftmaxCpuConfig&) {
  if (args.y.dim(0) == 0) return;
  softmax_backward<<<static_cast<unsigned>(args.y.dim(0)), kThreads, 0, cuda::lathe_stream()>>>(
      args.y.data, args.dy.data, args.dx.data, args.y.dim(1), args.scale, args.y.dtype == DType::bf16);
  LATHE_CUDA_CHECK_LAUNCH("softmax_backward (cuda)");
}

}  // namespace

Impl<SoftmaxArgs, SoftmaxCpuConfig> softmax_cuda_impl() {
  return default_config_cuda_impl<SoftmaxArgs, SoftmaxCpuConfig>(run_forward);
}
Impl<SoftmaxBackwardArgs, SoftmaxCpuConfig> softmax_backward_cuda_impl() {
  return default_config_cuda_impl<SoftmaxBackwardArgs, SoftmaxCpuConfig>(run_backward);
}

}  // namespace lathe
