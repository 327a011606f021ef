#include <algorithm>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/device/row_cache.h"
#include "lathe/ops/rms_norm/rms_norm_cuda.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

// bf16: x (and y) are bf16; bf16_out: y is (rms_norm.h allows a bf16 y beside an f32 x).
__global__ void rms_norm_forward(const void* x, const float* weight, void* y, float* inv_rms, int64_t dim, float eps,
                                 float weight_offset, bool bf16, bool bf16_out) {
  __shared__ float scratch[kThreads / cuda::kWarp];
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

// The forward with the row in registers (device/row_cache.h): K elements a thread, one read of x.
// Each thread sums its elements in the loop kernel's order, so both give the same bits.
template <int K>
__global__ void rms_norm_forward_cached(const void* x, const float* weight, void* y, float* inv_rms, int64_t dim,
                                        float eps, float weight_offset, bool bf16, bool bf16_out) {
  __shared__ float scratch[kThreads / cuda::kWarp];
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

__global__ void rms_norm_backward_dx(const void* x, const float* weight, const float* inv_rms, const void* dy, void* dx,
                                     int64_t dim, float weight_offset, bool bf16) {
  __shared__ float scratch[kThreads / cuda::kWarp];
  const int64_t row = blockIdx.x;
  float dot = 0.0f;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
    dot +=
        cuda::load_f32(dy, row * dim + d, bf16) * (weight[d] + weight_offset) * cuda::load_f32(x, row * dim + d, bf16);
  dot = cuda::block_reduce(dot, scratch, cuda::Sum{});
  const float scale = inv_rms[row], mean_dot = dot / static_cast<float>(dim);
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    const float scaled_dy = cuda::load_f32(dy, row * dim + d, bf16) * (weight[d] + weight_offset);
    const float value = cuda::load_f32(x, row * dim + d, bf16);
    cuda::store_f32(dx, row * dim + d, scale * (scaled_dy - value * scale * scale * mean_dot), bf16);
  }
}

// rms_norm_backward_dx with x and dy in registers: one read of each (same bits as the loop kernel).
template <int K>
__global__ void rms_norm_backward_dx_cached(const void* x, const float* weight, const float* inv_rms, const void* dy,
                                            void* dx, int64_t dim, float weight_offset, bool bf16) {
  __shared__ float scratch[kThreads / cuda::kWarp];
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

// dweight in two deterministic passes: block (row chunk, column block) sums kDweightRowsPerChunk
// rows of its columns into partial[chunk][d]; then one thread per column sums the chunks in order.
// (One pass with one thread per column put dim / 256 blocks on a GPU of 132 SMs, each looping over
// every row.)
constexpr int64_t kDweightRowsPerChunk = 64;

__global__ void rms_norm_backward_dweight_partials(const void* x, const float* inv_rms, const void* dy, float* partial,
                                                   int64_t rows, int64_t dim, bool bf16) {
  const int64_t d = blockIdx.y * int64_t{blockDim.x} + threadIdx.x, chunk = blockIdx.x;
  if (d >= dim) return;
  const int64_t first = chunk * kDweightRowsPerChunk;
  const int64_t last = first + kDweightRowsPerChunk < rows ? first + kDweightRowsPerChunk : rows;
  float sum = 0.0f;
  for (int64_t row = first; row < last; ++row)
    sum += cuda::load_f32(dy, row * dim + d, bf16) * cuda::load_f32(x, row * dim + d, bf16) * inv_rms[row];
  partial[chunk * dim + d] = sum;
}

__global__ void sum_chunks(const float* partial, int64_t chunks, int64_t dim, float* dweight) {
  const int64_t d = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (d >= dim) return;
  float sum = 0.0f;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) sum += partial[chunk * dim + d];
  dweight[d] = sum;
}

void run_forward(const RmsNormArgs& args, const RmsNormCpuConfig&) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  if (rows == 0) return;
  const auto* weight = static_cast<const float*>(args.weight.data);
  auto* inv_rms = static_cast<float*>(args.inv_rms.data);
  const bool bf16 = args.x.dtype == DType::bf16, bf16_out = args.y.dtype == DType::bf16;
  cuda::with_row_cache_width(dim, kThreads, [&]<int K>() {
    if constexpr (K == 0)
      rms_norm_forward<<<static_cast<unsigned>(rows), kThreads, 0, cuda::lathe_stream()>>>(
          args.x.data, weight, args.y.data, inv_rms, dim, args.eps, args.weight_offset, bf16, bf16_out);
    else
      rms_norm_forward_cached<K><<<static_cast<unsigned>(rows), kThreads, 0, cuda::lathe_stream()>>>(
          args.x.data, weight, args.y.data, inv_rms, dim, args.eps, args.weight_offset, bf16, bf16_out);
  });
  LATHE_CUDA_CHECK_LAUNCH("rms_norm (cuda)");
}

void run_backward(const RmsNormBackwardArgs& args, const RmsNormCpuConfig&) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  const bool bf16 = args.x.dtype == DType::bf16;
  if (rows > 0) {
    const auto* weight = static_cast<const float*>(args.weight.data);
    const auto* inv_rms = static_cast<const float*>(args.inv_rms.data);
    cuda::with_row_cache_width(dim, kThreads, [&]<int K>() {
      if constexpr (K == 0)
        rms_norm_backward_dx<<<static_cast<unsigned>(rows), kThreads, 0, cuda::lathe_stream()>>>(
            args.x.data, weight, inv_rms, args.dy.data, args.dx.data, dim, args.weight_offset, bf16);
      else
        rms_norm_backward_dx_cached<K><<<static_cast<unsigned>(rows), kThreads, 0, cuda::lathe_stream()>>>(
            args.x.data, weight, inv_rms, args.dy.data, args.dx.data, dim, args.weight_offset, bf16);
    });
    LATHE_CUDA_CHECK_LAUNCH("rms_norm_backward (cuda)");
  }
  if (dim > 0) {
    const int64_t chunks = std::max<int64_t>(1, (rows + kDweightRowsPerChunk - 1) / kDweightRowsPerChunk);
    Tensor partial = cuda::device_empty({chunks, dim}, DType::f32, "rms_norm_backward dweight partial sums");
    const unsigned column_blocks = static_cast<unsigned>((dim + kThreads - 1) / kThreads);
    rms_norm_backward_dweight_partials<<<dim3(static_cast<unsigned>(chunks), column_blocks), kThreads, 0,
                                         cuda::lathe_stream()>>>(
        args.x.data, static_cast<const float*>(args.inv_rms.data), args.dy.data, partial.ptr<float>(), rows, dim, bf16);
    LATHE_CUDA_CHECK_LAUNCH("rms_norm_backward (cuda)");
    sum_chunks<<<column_blocks, kThreads, 0, cuda::lathe_stream()>>>(partial.ptr<float>(), chunks, dim,
                                                                     static_cast<float*>(args.dweight.data));
    LATHE_CUDA_CHECK_LAUNCH("rms_norm_backward (cuda)");
  }
}

}  // namespace

Impl<RmsNormArgs, RmsNormCpuConfig> rms_norm_cuda_impl() {
  return default_config_cuda_impl<RmsNormArgs, RmsNormCpuConfig>(run_forward);
}
Impl<RmsNormBackwardArgs, RmsNormCpuConfig> rms_norm_backward_cuda_impl() {
  return default_config_cuda_impl<RmsNormBackwardArgs, RmsNormCpuConfig>(run_backward);
}

}  // namespace lathe
