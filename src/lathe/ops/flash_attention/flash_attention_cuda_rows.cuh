// The CUDA-core attention kernels' per-thread work (one warp per query or key row; the kernels in
// flash_attention_cuda.cu, their host emulation in flash_attention_cuda_emulated.cc). Grids are
// (row blocks of kWarpsPerBlock rows, heads, batch), kWarpsPerBlock * 32 threads a block.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/error.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/flash_attention/flash_attention.h"
#include "lathe/ops/flash_attention/flash_attention_cuda.h"

namespace lathe::attention_rows {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxPerLane = static_cast<int>(kFlashCudaMaxPerLane);

// Shapes and options of one call; rows are (batch, seq, heads, dim) contiguous.
struct Shapes {
  int64_t batch, seq_q, seq_k, n_heads, n_kv_heads, head_dim, v_head_dim;
  float scale, softcap;
  bool causal, bf16;
  int64_t window;
};

__device__ inline float warp_sum(float value) {
  for (int offset = cuda::kWarp / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// Loads row[lane + 32 r] for r < per_lane (zero past dim).
__device__ inline void load_lane_values(const void* base, int64_t row, int64_t dim, bool bf16, float* out) {
  const int lane = threadIdx.x % cuda::kWarp;
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t d = lane + int64_t{cuda::kWarp} * r;
    out[r] = d < dim ? cuda::load_f32(base, row + d, bf16) : 0.0f;
  }
}

__device__ inline float lane_dot(const float* lane_values, const void* base, int64_t row, int64_t dim, bool bf16) {
  const int lane = threadIdx.x % cuda::kWarp;
  float partial = 0.0f;
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t d = lane + int64_t{cuda::kWarp} * r;
    if (d < dim) partial += lane_values[r] * cuda::load_f32(base, row + d, bf16);
  }
  return warp_sum(partial);
}

// The capped score and d(capped)/d(score) (1 without a cap).
__device__ inline float capped_score(float dot, const Shapes& s, float* derivative) {
  return cuda::soft_cap(dot * s.scale, s.softcap, derivative);
}

__device__ inline int64_t q_row(const Shapes& s, int64_t b, int64_t i, int64_t h, int64_t dim) {
  return ((b * s.seq_q + i) * s.n_heads + h) * dim;
}
__device__ inline int64_t kv_row(const Shapes& s, int64_t b, int64_t j, int64_t g, int64_t dim) {
  return ((b * s.seq_k + j) * s.n_kv_heads + g) * dim;
}

// Grid (query blocks, n_heads, batch); warp w of block x handles query i = x * kWarpsPerBlock + w.
__device__ inline void forward_rows_thread(const void* q, const void* k, const void* v, void* o, float* lse,
                                           const Shapes& s) {
  const int64_t i = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / cuda::kWarp;
  const int64_t h = blockIdx.y, b = blockIdx.z, g = h / (s.n_heads / s.n_kv_heads);
  if (i >= s.seq_q) return;
  float q_values[kMaxPerLane], acc[kMaxPerLane];
  load_lane_values(q, q_row(s, b, i, h, s.head_dim), s.head_dim, s.bf16, q_values);
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) acc[r] = 0.0f;
  int64_t begin, end;
  visible_keys(s.causal, s.window, i, s.seq_q, s.seq_k, &begin, &end);
  float running_max = -INFINITY, running_sum = 0.0f;
  const int lane = threadIdx.x % cuda::kWarp;
  for (int64_t j = begin; j < end; ++j) {
    float unused;
    const float score =
        capped_score(lane_dot(q_values, k, kv_row(s, b, j, g, s.head_dim), s.head_dim, s.bf16), s, &unused);
    const float new_max = fmaxf(running_max, score);
    const float correction = expf(running_max - new_max), weight = expf(score - new_max);
    running_sum = running_sum * correction + weight;
    running_max = new_max;
    const int64_t v_base = kv_row(s, b, j, g, s.v_head_dim);
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int64_t d = lane + int64_t{cuda::kWarp} * r;
      if (d < s.v_head_dim) acc[r] = acc[r] * correction + weight * cuda::load_f32(v, v_base + d, s.bf16);
    }
  }
  const float inverse = end > begin ? 1.0f / running_sum : 0.0f;
  const int64_t o_base = q_row(s, b, i, h, s.v_head_dim);
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t d = lane + int64_t{cuda::kWarp} * r;
    if (d < s.v_head_dim) cuda::store_f32(o, o_base + d, acc[r] * inverse, s.bf16);
  }
  if (lane == 0) lse[(b * s.n_heads + h) * s.seq_q + i] = end > begin ? running_max + logf(running_sum) : -INFINITY;
}

// dq, and D[i] = do[i] . o[i] for the dk/dv kernel. Grid as forward_rows.
__device__ inline void backward_dq_thread(const void* q, const void* k, const void* v, const void* o, const float* lse,
                                          const void* d_o, void* dq, float* delta, const Shapes& s) {
  const int64_t i = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / cuda::kWarp;
  const int64_t h = blockIdx.y, b = blockIdx.z, g = h / (s.n_heads / s.n_kv_heads);
  if (i >= s.seq_q) return;
  const int lane = threadIdx.x % cuda::kWarp;
  float q_values[kMaxPerLane], do_values[kMaxPerLane], grad[kMaxPerLane];
  load_lane_values(q, q_row(s, b, i, h, s.head_dim), s.head_dim, s.bf16, q_values);
  const int64_t o_base = q_row(s, b, i, h, s.v_head_dim);
  load_lane_values(d_o, o_base, s.v_head_dim, s.bf16, do_values);
  const float row_delta = lane_dot(do_values, o, o_base, s.v_head_dim, s.bf16);
  const int64_t stat = (b * s.n_heads + h) * s.seq_q + i;
  if (lane == 0) delta[stat] = row_delta;
  const float row_lse = lse[stat];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) grad[r] = 0.0f;
  int64_t begin, end;
  visible_keys(s.causal, s.window, i, s.seq_q, s.seq_k, &begin, &end);
  for (int64_t j = begin; j < end; ++j) {
    const int64_t k_base = kv_row(s, b, j, g, s.head_dim);
    float derivative;
    const float score = capped_score(lane_dot(q_values, k, k_base, s.head_dim, s.bf16), s, &derivative);
    const float dp = lane_dot(do_values, v, kv_row(s, b, j, g, s.v_head_dim), s.v_head_dim, s.bf16);
    const float ds = expf(score - row_lse) * (dp - row_delta) * derivative * s.scale;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int64_t d = lane + int64_t{cuda::kWarp} * r;
      if (d < s.head_dim) grad[r] += ds * cuda::load_f32(k, k_base + d, s.bf16);
    }
  }
  const int64_t q_base = q_row(s, b, i, h, s.head_dim);
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t d = lane + int64_t{cuda::kWarp} * r;
    if (d < s.head_dim) cuda::store_f32(dq, q_base + d, grad[r], s.bf16);
  }
}

// dk and dv of key j of kv head g: sums over the query heads of the group and their queries that
// see j, in order. Grid (key blocks, n_kv_heads, batch).
__device__ inline void backward_dkdv_thread(const void* q, const void* k, const void* v, const float* lse,
                                            const void* d_o, const float* delta, void* dk, void* dv, const Shapes& s) {
  const int64_t j = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / cuda::kWarp;
  const int64_t g = blockIdx.y, b = blockIdx.z, group = s.n_heads / s.n_kv_heads;
  if (j >= s.seq_k) return;
  const int lane = threadIdx.x % cuda::kWarp;
  float k_values[kMaxPerLane], v_values[kMaxPerLane], dk_acc[kMaxPerLane], dv_acc[kMaxPerLane];
  const int64_t k_base = kv_row(s, b, j, g, s.head_dim), v_base = kv_row(s, b, j, g, s.v_head_dim);
  load_lane_values(k, k_base, s.head_dim, s.bf16, k_values);
  load_lane_values(v, v_base, s.v_head_dim, s.bf16, v_values);
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) dk_acc[r] = dv_acc[r] = 0.0f;
  for (int64_t h = g * group; h < (g + 1) * group; ++h)
    for (int64_t i = 0; i < s.seq_q; ++i) {
      int64_t begin, end;
      visible_keys(s.causal, s.window, i, s.seq_q, s.seq_k, &begin, &end);
      if (j < begin || j >= end) continue;
      const int64_t q_base = q_row(s, b, i, h, s.head_dim), o_base = q_row(s, b, i, h, s.v_head_dim);
      const int64_t stat = (b * s.n_heads + h) * s.seq_q + i;
      float derivative;
      const float score = capped_score(lane_dot(k_values, q, q_base, s.head_dim, s.bf16), s, &derivative);
      const float p = expf(score - lse[stat]);
      const float dp = lane_dot(v_values, d_o, o_base, s.v_head_dim, s.bf16);
      const float ds = p * (dp - delta[stat]) * derivative * s.scale;
#pragma unroll
      for (int r = 0; r < kMaxPerLane; ++r) {
        const int64_t d = lane + int64_t{cuda::kWarp} * r;
        if (d < s.head_dim) dk_acc[r] += ds * cuda::load_f32(q, q_base + d, s.bf16);
        if (d < s.v_head_dim) dv_acc[r] += p * cuda::load_f32(d_o, o_base + d, s.bf16);
      }
    }
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t d = lane + int64_t{cuda::kWarp} * r;
    if (d < s.head_dim) cuda::store_f32(dk, k_base + d, dk_acc[r], s.bf16);
    if (d < s.v_head_dim) cuda::store_f32(dv, v_base + d, dv_acc[r], s.bf16);
  }
}

// The host side: the shapes of a call (errors for what the kernels cannot take) and the grid.
inline Shapes shapes_of(const char* op, const TensorView& q, const TensorView& k, const TensorView& v,
                        const FlashAttentionOptions& options) {
  Shapes s{};
  s.batch = q.dim(0), s.seq_q = q.dim(1), s.n_heads = q.dim(2), s.head_dim = q.dim(3);
  s.seq_k = k.dim(1), s.n_kv_heads = k.dim(2), s.v_head_dim = v.dim(3);
  s.scale = attention_scale(options, s.head_dim);
  s.softcap = options.softcap;
  s.causal = options.causal;
  s.window = options.window;
  s.bf16 = q.dtype == DType::bf16;
  const int64_t limit = cuda::kWarp * kFlashCudaMaxPerLane;
  LATHE_CHECK(s.head_dim <= limit && s.v_head_dim <= limit, op, " (cuda): head_dim ", s.head_dim, " / v_head_dim ",
              s.v_head_dim, " exceed the CUDA kernel's ", limit);
  LATHE_CHECK(s.n_heads <= 65535 && s.batch <= 65535, op, " (cuda): ", s.n_heads, " heads x batch ", s.batch,
              " exceed the grid's 65535");
  return s;
}

inline dim3 row_grid(int64_t rows, int64_t heads, int64_t batch) {
  return dim3(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock), static_cast<unsigned>(heads),
              static_cast<unsigned>(batch));
}

}  // namespace lathe::attention_rows
