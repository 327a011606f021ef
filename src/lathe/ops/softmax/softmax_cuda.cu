#include <cmath>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/row_cache.h"
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

// The same two kernels with the row in registers (device/row_cache.h): x read once (the loop kernel
// reads it three times and takes each exp twice), y and dy once each. Sums in the loop kernels'
// order: the same bits.
template <int K>
__global__ void softmax_forward_cached(const void* x, void* y, int64_t cols, float scale, bool bf16) {
  __shared__ float scratch[kThreads / cuda::kWarp];
  const int64_t base = blockIdx.x * cols;
  float v[K];
  cuda::load_row_cached(x, base, cols, bf16, -INFINITY, v);
  float row_max = -INFINITY;
#pragma unroll
  for (int i = 0; i < K; ++i) row_max = fmaxf(row_max, v[i]);
  row_max = cuda::block_reduce(row_max, scratch, cuda::Max{});
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int64_t c = threadIdx.x + int64_t{i} * blockDim.x;
    v[i] = c < cols && row_max != -INFINITY ? expf(scale * (v[i] - row_max)) : 0.0f;  // fully masked row: 0
    sum += v[i];
  }
  sum = cuda::block_reduce(sum, scratch, cuda::Sum{});
  const float inverse = row_max == -INFINITY ? 0.0f : 1.0f / sum;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int64_t c = threadIdx.x + int64_t{i} * blockDim.x;
    if (c < cols) cuda::store_f32(y, base + c, v[i] * inverse, bf16);
  }
}

template <int K>
__global__ void softmax_backward_cached(const void* y, const void* dy, void* dx, int64_t cols, float scale, bool bf16) {
  __shared__ float scratch[kThreads / cuda::kWarp];
  const int64_t base = blockIdx.x * cols;
  float yv[K], dyv[K];
  cuda::load_row_cached(y, base, cols, bf16, 0.0f, yv);
  cuda::load_row_cached(dy, base, cols, bf16, 0.0f, dyv);
  float dot = 0.0f;
#pragma unroll
  for (int i = 0; i < K; ++i) dot += dyv[i] * yv[i];
  dot = cuda::block_reduce(dot, scratch, cuda::Sum{});
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int64_t c = threadIdx.x + int64_t{i} * blockDim.x;
    if (c < cols) cuda::store_f32(dx, base + c, scale * yv[i] * (dyv[i] - dot), bf16);
  }
}

void run_forward(const SoftmaxArgs& args, const SoftmaxCpuConfig&) {
  if (args.x.dim(0) == 0) return;
  const auto rows = static_cast<unsigned>(args.x.dim(0));
  const int64_t cols = args.x.dim(1);
  const bool bf16 = args.x.dtype == DType::bf16;
  cuda::with_row_cache_width(cols, kThreads, [&]<int K>() {
    if constexpr (K == 0)
      softmax_forward<<<rows, kThreads, 0, cuda::lathe_stream()>>>(args.x.data, args.y.data, cols, args.scale, bf16);
    else
      softmax_forward_cached<K>
          <<<rows, kThreads, 0, cuda::lathe_stream()>>>(args.x.data, args.y.data, cols, args.scale, bf16);
  });
  LATHE_CUDA_CHECK_LAUNCH("softmax (cuda)");
}

void run_backward(const SoftmaxBackwardArgs& args, const SoftmaxCpuConfig&) {
  if (args.y.dim(0) == 0) return;
  const auto rows = static_cast<unsigned>(args.y.dim(0));
  const int64_t cols = args.y.dim(1);
  const bool bf16 = args.y.dtype == DType::bf16;
  cuda::with_row_cache_width(cols, kThreads, [&]<int K>() {
    if constexpr (K == 0)
      softmax_backward<<<rows, kThreads, 0, cuda::lathe_stream()>>>(args.y.data, args.dy.data, args.dx.data, cols,
                                                                    args.scale, bf16);
    else
      softmax_backward_cached<K><<<rows, kThreads, 0, cuda::lathe_stream()>>>(args.y.data, args.dy.data, args.dx.data,
                                                                              cols, args.scale, bf16);
  });
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
