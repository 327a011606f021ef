// rope's CUDA kernel and the host steps that launch it, shared by the GPU (rope_cuda.cu) and the
// host emulation (rope_cuda_emulated.cc); see device/cuda_launcher.cuh and rope_cuda.h. One block
// per token (batch, seq) row; each thread rotates whole pairs, so the output may alias the input.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/error.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/rope/rope.h"
#include "lathe/ops/rope/rope_cuda.h"

namespace lathe::rope_cuda {

constexpr int kThreads = 256;

// Everything the kernel needs besides the tensors (sm_90 takes up to 32 KiB of parameters).
struct RotateParams {
  double inv_freq[kRopeCudaMaxPairs];
  int64_t seq, heads, head_dim, half;
  int64_t position_offset;
  double attention_factor;
  double direction;  // +1 forward, -1 backward (rotation by -angle)
  bool interleaved, bf16, in_place;
  int position_dtype;  // 0: none (0..seq-1), 1: i32, 2: i64
};

__device__ inline double token_position(const void* positions, int64_t s, const RotateParams& p) {
  double position = static_cast<double>(s);
  if (p.position_dtype == 1) position = static_cast<const int32_t*>(positions)[s];
  if (p.position_dtype == 2) position = static_cast<double>(static_cast<const int64_t*>(positions)[s]);
  return position + static_cast<double>(p.position_offset);
}

// Block: one (batch, seq) row of heads x head_dim values.
struct Rotate {
  __device__ void operator()(unsigned char*, const void* in, const void* positions, void* out,
                             const RotateParams& p) const {
    const int64_t row = blockIdx.x, s = row % p.seq;
    const int64_t row_base = row * p.heads * p.head_dim;
    const double position = token_position(positions, s, p);
    const int64_t pairs = p.heads * p.half;
    for (int64_t k = threadIdx.x; k < pairs; k += blockDim.x) {
      const int64_t h = k / p.half, i = k % p.half;
      double sine, cosine;
      sincos(position * p.inv_freq[i], &sine, &cosine);
      const float c = static_cast<float>(p.attention_factor * cosine);
      const float sn = static_cast<float>(p.attention_factor * p.direction * sine);
      const int64_t base = row_base + h * p.head_dim;
      const int64_t first = base + (p.interleaved ? 2 * i : i), second = base + (p.interleaved ? 2 * i + 1 : i + p.half);
      const float x1 = cuda::load_f32(in, first, p.bf16), x2 = cuda::load_f32(in, second, p.bf16);
      cuda::store_f32(out, first, x1 * c - x2 * sn, p.bf16);
      cuda::store_f32(out, second, x2 * c + x1 * sn, p.bf16);
    }
    if (p.in_place) return;
    const int64_t rotary_dim = 2 * p.half, tail = p.head_dim - rotary_dim;  // pass-through dims
    for (int64_t k = threadIdx.x; k < p.heads * tail; k += blockDim.x) {
      const int64_t index = row_base + (k / tail) * p.head_dim + rotary_dim + k % tail;
      cuda::store_f32(out, index, cuda::load_f32(in, index, p.bf16), p.bf16);
    }
  }
};

// direction +1: rope's forward (in x, out y); -1: its backward (in dy, out dx).
template <class Launcher>
void run_rotate(const char* op, const TensorView& in, const TensorView& positions, const TensorView& out,
                const RopeParams& params, double direction, Launcher& launcher) {
  const int64_t rows = in.dim(0) * in.dim(1);
  if (rows == 0 || in.dim(2) == 0) return;
  RotateParams p{};
  p.seq = in.dim(1), p.heads = in.dim(2), p.head_dim = in.dim(3);
  p.half = rope_rotary_dim(params, p.head_dim) / 2;
  LATHE_CHECK(p.half <= kRopeCudaMaxPairs, op, ": rotary_dim ", 2 * p.half, " exceeds the CUDA kernel's ",
              2 * kRopeCudaMaxPairs);
  rope_inverse_frequencies(2 * p.half, params.theta, params.scaling, p.inv_freq);
  p.position_offset = params.position_offset;
  p.attention_factor = params.attention_factor;
  p.direction = direction;
  p.interleaved = params.interleaved;
  p.bf16 = in.dtype == DType::bf16;
  p.in_place = in.data == out.data;
  p.position_dtype = positions.data == nullptr ? 0 : positions.dtype == DType::i32 ? 1 : 2;
  launcher.launch(op, dim3(static_cast<unsigned>(rows)), kThreads, 0, Rotate{}, static_cast<const void*>(in.data),
                  static_cast<const void*>(positions.data), out.data, p);
}

template <class Launcher>
void run_forward(const RopeArgs& args, Launcher& launcher) {
  run_rotate("rope (cuda)", args.x, args.positions, args.y, args.params, 1.0, launcher);
}

template <class Launcher>
void run_backward(const RopeBackwardArgs& args, Launcher& launcher) {
  run_rotate("rope_backward (cuda)", args.dy, args.positions, args.dx, args.params, -1.0, launcher);
}

}  // namespace lathe::rope_cuda
