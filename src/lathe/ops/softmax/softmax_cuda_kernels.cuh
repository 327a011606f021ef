// softmax's CUDA kernels and the host steps that launch them, shared by the GPU (softmax_cuda.cu,
// cuda::DeviceLauncher) and the host emulation (softmax_cuda_emulated.cc, simt::HostLauncher); see
// device/cuda_launcher.cuh. One block of kThreads per row, the max and sums reduced by the fixed
// tree of cuda::block_reduce (deterministic); a fully masked row (all -inf) gives zeros. Rows up
// to kThreads * kRowCacheMaxPerThread elements stay in registers (device/row_cache.h: x read once,
// each exp taken once); wider rows run the loop kernels (x read three times, each exp taken twice).
// The sums run in the same order in both: the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/row_cache.h"
#include "lathe/ops/softmax/softmax.h"

namespace lathe::softmax_cuda {

constexpr int kThreads = 256;
constexpr size_t kReduceScratchBytes = kThreads / cuda::kWarp * sizeof(float);

// Block r: y's row r = softmax(scale * x's row r), rows `cols` long.
struct Forward {
  __device__ void operator()(unsigned char* shared, const void* x, void* y, int64_t cols, float scale,
                             bool bf16) const {
    auto* scratch = reinterpret_cast<float*>(shared);
    const int64_t base = blockIdx.x * cols;
    float row_max = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      row_max = fmaxf(row_max, cuda::load_f32(x, base + c, bf16));
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
};

// Block r: dx's row r = scale * y * (dy - sum(dy * y)).
struct Backward {
  __device__ void operator()(unsigned char* shared, const void* y, const void* dy, void* dx, int64_t cols, float scale,
                             bool bf16) const {
    auto* scratch = reinterpret_cast<float*>(shared);
    const int64_t base = blockIdx.x * cols;
    float dot = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      dot += cuda::load_f32(dy, base + c, bf16) * cuda::load_f32(y, base + c, bf16);
    dot = cuda::block_reduce(dot, scratch, cuda::Sum{});
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      cuda::store_f32(dx, base + c,
                      scale * cuda::load_f32(y, base + c, bf16) * (cuda::load_f32(dy, base + c, bf16) - dot), bf16);
  }
};

// The same two with the row in registers, K elements a thread.
template <int K>
struct ForwardCached {
  __device__ void operator()(unsigned char* shared, const void* x, void* y, int64_t cols, float scale,
                             bool bf16) const {
    auto* scratch = reinterpret_cast<float*>(shared);
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
};

template <int K>
struct BackwardCached {
  __device__ void operator()(unsigned char* shared, const void* y, const void* dy, void* dx, int64_t cols, float scale,
                             bool bf16) const {
    auto* scratch = reinterpret_cast<float*>(shared);
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
};

template <class Launcher>
void run_forward(const SoftmaxArgs& args, Launcher& launcher, cuda::RowKernels kernels = cuda::RowKernels::by_width) {
  if (args.x.dim(0) == 0) return;
  const dim3 grid(static_cast<unsigned>(args.x.dim(0)));
  const int64_t cols = args.x.dim(1);
  const bool bf16 = args.x.dtype == DType::bf16;
  cuda::with_row_kernel<Forward, ForwardCached>(cols, kThreads, kernels, [&](auto body) {
    launcher.launch("softmax (cuda)", grid, kThreads, kReduceScratchBytes, body, static_cast<const void*>(args.x.data),
                    args.y.data, cols, args.scale, bf16);
  });
}

template <class Launcher>
void run_backward(const SoftmaxBackwardArgs& args, Launcher& launcher,
                  cuda::RowKernels kernels = cuda::RowKernels::by_width) {
  if (args.y.dim(0) == 0) return;
  const dim3 grid(static_cast<unsigned>(args.y.dim(0)));
  const int64_t cols = args.y.dim(1);
  const bool bf16 = args.y.dtype == DType::bf16;
  cuda::with_row_kernel<Backward, BackwardCached>(cols, kThreads, kernels, [&](auto body) {
    launcher.launch("softmax_backward (cuda)", grid, kThreads, kReduceScratchBytes, body,
                    static_cast<const void*>(args.y.data), static_cast<const void*>(args.dy.data), args.dx.data, cols,
                    args.scale, bf16);
  });
}

}  // namespace lathe::softmax_cuda
