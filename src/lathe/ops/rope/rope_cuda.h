// The CUDA implementations of rope and rope_backward (rope_cuda.cu), registered by rope.cc in
// builds with the CUDA backend. One block per token (batch, seq) row; each thread rotates whole
// pairs, so y may alias x as on the CPU. inv_freq is computed on the host in double by
// rope_inverse_frequencies (every scaling rule stays in one place) and travels in the kernel's
// parameters (at most kRopeCudaMaxPairs pairs: rotary_dim <= 1024); the angle and its sine and
// cosine are evaluated in double on the device, as the CPU path reduces angles in double, then the
// rotation runs in f32. Positions may be absent (0..seq-1), i32 or i64 on the device. The config
// (tokens_per_task) is not used on the GPU: its space is the default alone.
// The kernels and host steps: rope_cuda_kernels.cuh; their host emulation (builds with
// the CUDA toolkit): rope_cuda_emulated.cc, "cuda_emulated".
#pragma once

#include "lathe/ops/rope/rope.h"

namespace lathe {

inline constexpr int64_t kRopeCudaMaxPairs = 512;

Impl<RopeArgs, RopeCpuConfig> rope_cuda_impl();
std::vector<Impl<RopeArgs, RopeCpuConfig>> rope_cuda_emulated_impls();
Impl<RopeBackwardArgs, RopeCpuConfig> rope_backward_cuda_impl();
std::vector<Impl<RopeBackwardArgs, RopeCpuConfig>> rope_backward_cuda_emulated_impls();

}  // namespace lathe
