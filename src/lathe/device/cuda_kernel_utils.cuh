// Small building blocks of lathe's CUDA kernels (device code; include from .cu files, or from
// host code that runs a kernel under device/simt_emulation.h: a host compiler gets
// cuda_host_emulation.h): element loads and stores as f32 for f32 and bf16 tensors, and
// deterministic block reductions (a fixed tree for a fixed block size, so reruns are bitwise
// identical).
#pragma once

#include <cuda_bf16.h>
#if !defined(__CUDACC__)
#include "lathe/device/cuda_host_emulation.h"
#endif

#include <cstdint>

#include "lathe/core/dtype.h"
#include "lathe/device/stream.h"

namespace lathe::cuda {

inline cudaStream_t lathe_stream() { return static_cast<cudaStream_t>(stream_handle()); }

__device__ inline float load_f32(const void* base, int64_t index, bool bf16) {
  return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index])
              : static_cast<const float*>(base)[index];
}

// bf16 stores round to nearest even, as lathe's host conversion does.
__device__ inline void store_f32(void* base, int64_t index, float value, bool bf16) {
  if (bf16)
    static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16_rn(value);
  else
    static_cast<float*>(base)[index] = value;
}

// Element `index` of an i32 or i64 index tensor (token ids, targets) as int64.
__device__ inline int64_t load_index(const void* base, int64_t index, bool i64) {
  return i64 ? static_cast<const int64_t*>(base)[index] : static_cast<const int32_t*>(base)[index];
}

constexpr int kWarp = 32;

// A thread per column (blocks of any size over `cols`): sums[j] = x[0][j] + x[1][j] + ... in f32,
// the rows in order (deterministic); x contiguous (rows, cols). rms_norm's dweight over its chunk
// partials, matmul's dbias over the rows of its gradient.
struct ColumnSumsInOrder {
  __device__ void operator()(unsigned char*, const float* x, int64_t rows, int64_t cols, float* sums) const {
    const int64_t column = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
    if (column >= cols) return;
    float sum = 0.0f;
    for (int64_t row = 0; row < rows; ++row) sum += x[row * cols + column];
    sums[column] = sum;
  }
};

// Blocks of `threads` for a grid-stride loop over `count` elements: one per `threads` elements, at
// least one, at most 65535 * 16 (the loop covers the rest).
inline unsigned grid_stride_blocks(int64_t count, int threads) {
  const int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks < 65535 * 16 ? blocks : 65535 * 16);
}

// Named barriers (ids 1-15; __syncthreads is barrier 0), whole warps only: barrier_sync waits until
// `threads` threads have arrived at barrier `id`, itself included; barrier_arrive counts the
// calling warp's threads there and goes on. (Emulated: simt::barrier_sync and barrier_arrive.)
__device__ inline void barrier_sync(int id, int threads) {
#if defined(__CUDACC__)
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#else
  simt::barrier_sync(id, threads);
#endif
}
__device__ inline void barrier_arrive(int id, int threads) {
#if defined(__CUDACC__)
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#else
  simt::barrier_arrive(id, threads);
#endif
}

// A row kept in registers (see device/row_cache.h): element threadIdx.x + i * blockDim.x of the
// row at `base` into v[i] as f32, `pad` past the end. Loads are coalesced across the block.
template <int K>
__device__ inline void load_row_cached(const void* x, int64_t base, int64_t dim, bool bf16, float pad, float (&v)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const int64_t d = threadIdx.x + int64_t{i} * blockDim.x;
    v[i] = d < dim ? load_f32(x, base + d, bf16) : pad;
  }
}

// Sum (or max) over the block; every thread gets the result. `scratch` holds blockDim.x / 32 floats.
template <class Combine>
__device__ inline float block_reduce(float value, float* scratch, Combine combine) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = combine(value, __shfl_xor_sync(0xffffffffu, value, offset));
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, warps = blockDim.x / kWarp;
  __syncthreads();  // scratch may still be read by an earlier reduction
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = scratch[0];
  for (int w = 1; w < warps; ++w) value = combine(value, scratch[w]);
  return value;
}

// Gemma's logit soft-cap: cap * tanh(x / cap), and its derivative in *derivative; with cap <= 0
// (off) x itself and 1.
__device__ inline float soft_cap(float x, float cap, float* derivative) {
  if (cap <= 0.0f) {
    *derivative = 1.0f;
    return x;
  }
  const float t = tanhf(x / cap);
  *derivative = 1.0f - t * t;
  return cap * t;
}

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

}  // namespace lathe::cuda
