// rms_norm's CUDA kernels and the host steps that launch them, shared by the GPU (rms_norm_cuda.cu,
// cuda::DeviceLauncher) and the host emulation (rms_norm_cuda_emulated.cc, simt::HostLauncher); see
// device/cuda_launcher.cuh. One block of kThreads per row; the sum of squares (the backward's dot)
// reduced in f32 by the fixed tree of cuda::block_reduce (deterministic). Rows up to
// kThreads * kRowCacheMaxPerThread elements stay in registers (device/row_cache.h: x read once);
// wider rows run the loop kernels, which read x twice. Each thread sums its elements in the same
// order in both, so both give the same bits. dweight in two deterministic passes: partial sums over
// chunks of kDweightRowsPerChunk rows, then the chunks in order, one thread per column each.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/row_cache.h"
#include "lathe/ops/rms_norm/rms_norm.h"

namespace lathe::rms_norm_cuda {

constexpr int kThreads = 256;
constexpr size_t kReduceScratchBytes = kThreads / cuda::kWarp * sizeof(float);
// (One pass with one thread per column put dim / 256 blocks on a GPU of 132 SMs, each looping over
// every row.)
constexpr int64_t kDweightRowsPerChunk = 64;

// bf16: x (and y) are bf16; bf16_out: y is (rms_norm.h allows a bf16 y beside an f32 x).
// Block r: row r of x (rows, dim) -> y, inv_rms[r].
struct Forward {
  __device__ void operator()(unsigned char* shared, const void* x, const float* weight, void* y, float* inv_rms,
                             int64_t dim, float eps, float weight_offset, bool bf16, bool bf16_out) const {
    auto* scratch = reinterpret_cast<float*>(shared);
    const int64_t row = blockIdx.x;
    float sum_squares = 0.0f;
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      const float value = cuda::load_f32(x, row * dim + d, bf16);
      sum_squares += value * value;
    }
    sum_squares = cuda::block_reduce(sum_squares, scratch, cuda::Sum{});
    const float scale = rsqrtf(sum_squares / static_cast<float>(dim) + eps);
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
      cuda::store_f32(y, row * dim + d, cuda::load_f32(x, row * dim + d, bf16) * scale * (weight[d] + weight_offset),
                      bf16_out);
    if (inv_rms != nullptr && threadIdx.x == 0) inv_rms[row] = scale;
  }
};

// The forward with the row in registers: K elements a thread, one read of x.
template <int K>
struct ForwardCached {
  __device__ void operator()(unsigned char* shared, const void* x, const float* weight, void* y, float* inv_rms,
                             int64_t dim, float eps, float weight_offset, bool bf16, bool bf16_out) const {
    auto* scratch = reinterpret_cast<float*>(shared);
    const int64_t row = blockIdx.x, base = row * dim;
    float v[K];
    cuda::load_row_cached(x, base, dim, bf16, 0.0f, v);
    float sum_squares = 0.0f;
#pragma unroll
    for (int i = 0; i < K; ++i) sum_squares += v[i] * v[i];
    sum_squares = cuda::block_reduce(sum_squares, scratch, cuda::Sum{});
    const float scale = rsqrtf(sum_squares / static_cast<float>(dim) + eps);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int64_t d = threadIdx.x + int64_t{i} * blockDim.x;
      if (d < dim) cuda::store_f32(y, base + d, v[i] * scale * (weight[d] + weight_offset), bf16_out);
    }
    if (inv_rms != nullptr && threadIdx.x == 0) inv_rms[row] = scale;
  }
};

// Block r: dx's row r from x, dy and inv_rms[r].
struct BackwardDx {
  __device__ void operator()(unsigned char* shared, const void* x, const float* weight, const float* inv_rms,
                             const void* dy, void* dx, int64_t dim, float weight_offset, bool bf16) const {
    auto* scratch = reinterpret_cast<float*>(shared);
    const int64_t row = blockIdx.x;
    float dot = 0.0f;
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
      dot += cuda::load_f32(dy, row * dim + d, bf16) * (weight[d] + weight_offset) *
             cuda::load_f32(x, row * dim + d, bf16);
    dot = cuda::block_reduce(dot, scratch, cuda::Sum{});
    const float scale = inv_rms[row], mean_dot = dot / static_cast<float>(dim);
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      const float scaled_dy = cuda::load_f32(dy, row * dim + d, bf16) * (weight[d] + weight_offset);
      const float value = cuda::load_f32(x, row * dim + d, bf16);
      cuda::store_f32(dx, row * dim + d, scale * (scaled_dy - value * scale * scale * mean_dot), bf16);
    }
  }
};

// BackwardDx with x and dy in registers: one read of each.
template <int K>
struct BackwardDxCached {
  __device__ void operator()(unsigned char* shared, const void* x, const float* weight, const float* inv_rms,
                             const void* dy, void* dx, int64_t dim, float weight_offset, bool bf16) const {
    auto* scratch = reinterpret_cast<float*>(shared);
    const int64_t row = blockIdx.x, base = row * dim;
    float xv[K], dyv[K];
    cuda::load_row_cached(x, base, dim, bf16, 0.0f, xv);
    cuda::load_row_cached(dy, base, dim, bf16, 0.0f, dyv);
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int64_t d = threadIdx.x + int64_t{i} * blockDim.x;
      if (d < dim) dot += dyv[i] * (weight[d] + weight_offset) * xv[i];
    }
    dot = cuda::block_reduce(dot, scratch, cuda::Sum{});
    const float scale = inv_rms[row], mean_dot = dot / static_cast<float>(dim);
#pragma unroll
    for (int i = 0; i < K; ++i) {
      const int64_t d = threadIdx.x + int64_t{i} * blockDim.x;
      if (d < dim)
        cuda::store_f32(dx, base + d, scale * (dyv[i] * (weight[d] + weight_offset) - xv[i] * scale * scale * mean_dot),
                        bf16);
    }
  }
};

// Grid (chunks, column blocks): block (c, b) sums rows [c * 64, c * 64 + 64) of its kThreads
// columns into partial[c][d].
struct DweightPartials {
  __device__ void operator()(unsigned char*, const void* x, const float* inv_rms, const void* dy, float* partial,
                             int64_t rows, int64_t dim, bool bf16) const {
    const int64_t d = blockIdx.y * int64_t{blockDim.x} + threadIdx.x, chunk = blockIdx.x;
    if (d >= dim) return;
    const int64_t first = chunk * kDweightRowsPerChunk;
    const int64_t last = first + kDweightRowsPerChunk < rows ? first + kDweightRowsPerChunk : rows;
    float sum = 0.0f;
    for (int64_t row = first; row < last; ++row)
      sum += cuda::load_f32(dy, row * dim + d, bf16) * cuda::load_f32(x, row * dim + d, bf16) * inv_rms[row];
    partial[chunk * dim + d] = sum;
  }
};

template <class Launcher>
void run_forward(const RmsNormArgs& args, Launcher& launcher, cuda::RowKernels kernels = cuda::RowKernels::by_width) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  if (rows == 0) return;
  const auto* weight = static_cast<const float*>(args.weight.data);
  auto* inv_rms = static_cast<float*>(args.inv_rms.data);
  const bool bf16 = args.x.dtype == DType::bf16, bf16_out = args.y.dtype == DType::bf16;
  const dim3 grid(static_cast<unsigned>(rows));
  cuda::with_row_kernel<Forward, ForwardCached>(dim, kThreads, kernels, [&](auto body) {
    launcher.launch("rms_norm (cuda)", grid, kThreads, kReduceScratchBytes, body, args.x.data, weight, args.y.data,
                    inv_rms, dim, args.eps, args.weight_offset, bf16, bf16_out);
  });
}

template <class Launcher>
void run_backward(const RmsNormBackwardArgs& args, Launcher& launcher,
                  cuda::RowKernels kernels = cuda::RowKernels::by_width) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  const bool bf16 = args.x.dtype == DType::bf16;
  const auto* inv_rms = static_cast<const float*>(args.inv_rms.data);
  if (rows > 0) {
    const auto* weight = static_cast<const float*>(args.weight.data);
    const dim3 grid(static_cast<unsigned>(rows));
    cuda::with_row_kernel<BackwardDx, BackwardDxCached>(dim, kThreads, kernels, [&](auto body) {
      launcher.launch("rms_norm_backward (cuda)", grid, kThreads, kReduceScratchBytes, body, args.x.data, weight,
                      inv_rms, args.dy.data, args.dx.data, dim, args.weight_offset, bf16);
    });
  }
  if (dim > 0) {
    const int64_t chunks = std::max<int64_t>(1, (rows + kDweightRowsPerChunk - 1) / kDweightRowsPerChunk);
    Tensor partial = launcher.scratch({chunks, dim}, DType::f32, "rms_norm_backward dweight partial sums");
    const auto column_blocks = static_cast<unsigned>((dim + kThreads - 1) / kThreads);
    launcher.launch("rms_norm_backward (cuda)", dim3(static_cast<unsigned>(chunks), column_blocks), kThreads, 0,
                    DweightPartials{}, args.x.data, inv_rms, args.dy.data, partial.ptr<float>(), rows, dim, bf16);
    // dweight[d] = the chunks' partial[c][d], c in order.
    launcher.launch("rms_norm_backward (cuda)", dim3(column_blocks), kThreads, 0, cuda::ColumnSumsInOrder{},
                    static_cast<const float*>(partial.ptr<float>()), chunks, dim,
                    static_cast<float*>(args.dweight.data));
  }
}

}  // namespace lathe::rms_norm_cuda
