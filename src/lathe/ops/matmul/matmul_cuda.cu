#include <cuda_bf16.h>

#include <cmath>

#include "lathe/device/cuda_check.h"
#include "lathe/device/stream.h"
#include "lathe/ops/matmul/matmul_cuda.h"
#include "lathe/ops/matmul/matmul_cuda_split.cuh"

namespace lathe {
namespace {

constexpr int kThreads = 256;

cudaStream_t stream() { return static_cast<cudaStream_t>(cuda::stream_handle()); }

unsigned blocks_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 32 ? (blocks > 0 ? blocks : 1) : 65535 * 32);
}

// The definitions of ops/matmul/matmul.cc's apply_activation and activation_derivative, in f32.
__device__ float activate(float x, Activation activation) {
  switch (activation) {
    case Activation::none:
      return x;
    case Activation::relu:
      return x > 0.0f ? x : 0.0f;
    case Activation::gelu_tanh: {
      const float scale = 0.7978845608028654f;  // sqrt(2 / pi)
      return 0.5f * x * (1.0f + tanhf(scale * (x + 0.044715f * x * x * x)));
    }
    case Activation::silu:
      return x / (1.0f + expf(-x));
  }
  return x;
}

__device__ float activation_slope(float x, Activation activation) {
  switch (activation) {
    case Activation::none:
      return 1.0f;
    case Activation::relu:
      return x > 0.0f ? 1.0f : 0.0f;
    case Activation::gelu_tanh: {
      const float scale = 0.7978845608028654f;
      const float t = tanhf(scale * (x + 0.044715f * x * x * x));
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * scale * (1.0f + 3.0f * 0.044715f * x * x);
    }
    case Activation::silu: {
      const float sigmoid = 1.0f / (1.0f + expf(-x));
      return sigmoid * (1.0f + x * (1.0f - sigmoid));
    }
  }
  return 1.0f;
}

__device__ int64_t offset_of(const DeviceMatrices& m, int64_t flat) {
  const int64_t per_batch = m.rows * m.cols;
  const int64_t t = flat / per_batch, rest = flat % per_batch;
  return t * m.batch_stride + rest / m.cols * m.ld + rest % m.cols;
}

__global__ void activation_kernel(DeviceMatrices c, Activation activation) {
  const int64_t count = c.batch * c.rows * c.cols;
  for (int64_t flat = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; flat < count;
       flat += int64_t{gridDim.x} * blockDim.x) {
    float& value = c.data[offset_of(c, flat)];
    value = activate(value, activation);
  }
}

__global__ void activation_gradient_kernel(DeviceMatrices dc, DeviceMatrices pre, Activation activation, float* g) {
  const int64_t count = dc.batch * dc.rows * dc.cols;
  for (int64_t flat = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; flat < count;
       flat += int64_t{gridDim.x} * blockDim.x) {
    const float slope =
        activation == Activation::none ? 1.0f : activation_slope(pre.data[offset_of(pre, flat)], activation);
    g[flat] = dc.data[offset_of(dc, flat)] * slope;
  }
}

// One thread per column, rows summed in a fixed order: deterministic.
__global__ void column_sums_kernel(const float* g, int64_t rows, int64_t cols, float* sums) {
  const int64_t column = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (column >= cols) return;
  float sum = 0.0f;
  for (int64_t row = 0; row < rows; ++row) sum += g[row * cols + column];
  sums[column] = sum;
}

__global__ void add_bias_kernel(DeviceMatrices c, const float* bias, bool accumulate) {
  const int64_t count = c.batch * c.rows * c.cols;
  for (int64_t flat = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; flat < count;
       flat += int64_t{gridDim.x} * blockDim.x) {
    float& value = c.data[offset_of(c, flat)];
    value = (accumulate ? value : 0.0f) + bias[flat % c.cols];
  }
}

__global__ void split_bf16x3_kernel(const float* x, int64_t count, __nv_bfloat16* parts) {
  matmul_cuda::SplitBf16x3{}(nullptr, x, count, parts);
}

}  // namespace

void cuda_add_bias(const DeviceMatrices& c, const float* bias, bool accumulate) {
  if (c.batch * c.rows * c.cols == 0) return;
  add_bias_kernel<<<blocks_for(c.batch * c.rows * c.cols), kThreads, 0, stream()>>>(c, bias, accumulate);
  LATHE_CUDA_CHECK_LAUNCH("matmul (cuda): bias");
}

void cuda_split_bf16x3(const float* x, int64_t count, void* parts) {
  if (count == 0) return;
  split_bf16x3_kernel<<<blocks_for(count), kThreads, 0, stream()>>>(x, count, static_cast<__nv_bfloat16*>(parts));
  LATHE_CUDA_CHECK_LAUNCH("matmul_backward (cuda): bf16 split");
}

void cuda_apply_activation(const DeviceMatrices& c, Activation activation) {
  if (activation == Activation::none || c.batch * c.rows * c.cols == 0) return;
  activation_kernel<<<blocks_for(c.batch * c.rows * c.cols), kThreads, 0, stream()>>>(c, activation);
  LATHE_CUDA_CHECK_LAUNCH("matmul (cuda): activation");
}

void cuda_activation_gradient(const DeviceMatrices& dc, const DeviceMatrices& pre_activation, Activation activation,
                              float* g) {
  const int64_t count = dc.batch * dc.rows * dc.cols;
  if (count == 0) return;
  activation_gradient_kernel<<<blocks_for(count), kThreads, 0, stream()>>>(dc, pre_activation, activation, g);
  LATHE_CUDA_CHECK_LAUNCH("matmul_backward (cuda): activation gradient");
}

void cuda_column_sums(const float* g, int64_t rows, int64_t cols, float* dbias) {
  if (cols == 0) return;
  column_sums_kernel<<<blocks_for(cols), kThreads, 0, stream()>>>(g, rows, cols, dbias);
  LATHE_CUDA_CHECK_LAUNCH("matmul_backward (cuda): bias gradient");
}

}  // namespace lathe
