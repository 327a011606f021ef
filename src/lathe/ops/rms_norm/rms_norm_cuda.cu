#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/rms_norm/rms_norm_cuda.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

__global__ void rms_norm_forward(const void* x, const float* weight, void* y, float* inv_rms, int64_t dim, float eps,
                                 float weight_offset, bool bf16) {
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
                    bf16);
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

__global__ void rms_norm_backward_dweight(const void* x, const float* inv_rms, const void* dy, float* dweight,
                                          int64_t rows, int64_t dim, bool bf16) {
  const int64_t d = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (d >= dim) return;
  float sum = 0.0f;
  for (int64_t row = 0; row < rows; ++row)
    sum += cuda::load_f32(dy, row * dim + d, bf16) * cuda::load_f32(x, row * dim + d, bf16) * inv_rms[row];
  dweight[d] = sum;
}

void run_forward(const RmsNormArgs& args, const RmsNormCpuConfig&) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  if (rows == 0) return;
  rms_norm_forward<<<static_cast<unsigned>(rows), kThreads, 0, cuda::lathe_stream()>>>(
      args.x.data, static_cast<const float*>(args.weight.data), args.y.data, static_cast<float*>(args.inv_rms.data),
      dim, args.eps, args.weight_offset, args.x.dtype == DType::bf16);
  LATHE_CUDA_CHECK_LAUNCH("rms_norm (cuda)");
}

void run_backward(const RmsNormBackwardArgs& args, const RmsNormCpuConfig&) {
  const int64_t rows = args.x.dim(0), dim = args.x.dim(1);
  const bool bf16 = args.x.dtype == DType::bf16;
  if (rows > 0) {
    rms_norm_backward_dx<<<static_cast<unsigned>(rows), kThreads, 0, cuda::lathe_stream()>>>(
        args.x.data, static_cast<const float*>(args.weight.data), static_cast<const float*>(args.inv_rms.data),
        args.dy.data, args.dx.data, dim, args.weight_offset, bf16);
    LATHE_CUDA_CHECK_LAUNCH("rms_norm_backward (cuda)");
  }
  if (dim > 0) {
    rms_norm_backward_dweight<<<static_cast<unsigned>((dim + kThreads - 1) / kThreads), kThreads, 0,
                                cuda::lathe_stream()>>>(args.x.data, static_cast<const float*>(args.inv_rms.data),
                                                        args.dy.data, static_cast<float*>(args.dweight.data), rows, dim,
                                                        bf16);
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
