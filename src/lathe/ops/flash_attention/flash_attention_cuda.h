// The CUDA implementations of flash_attention and flash_attention_backward
// (flash_attention_cuda.cu), registered by flash_attention.cc in builds with the CUDA backend.
//
// This is the correct-first version: CUDA cores, f32 math, one warp per query row (forward, dq) or
// key row (dk, dv), the online softmax of FlashAttention-2, every feature of the op (causal,
// sliding window, soft-cap, GQA, a v_head_dim of its own, f32 and bf16). Each lane holds
// head_dim / 32 query values and v_head_dim / 32 accumulators, so both dims are limited to
// 32 * kFlashCudaMaxPerLane = 512. No atomics: dq sums keys in order; dk and dv sum, in order, the
// query heads sharing the kv head and their queries (a second kernel per key row, using D and lse
// from the first), so results are bitwise reproducible. The op contract tests check this one
// wherever a GPU is usable.
//
// The config picks the kernels, forward and backward alike: kFlashCudaTensorCoreConfig (block_q
// 64) runs the tensor-core kernels of flash_attention_cuda_mma.h where they apply (bf16, head_dim
// == v_head_dim in {64, 128}) and the CUDA-core kernels elsewhere; kFlashCudaWgmmaConfig (block_q
// 128) runs the wgmma kernels where they apply (the same, on a compute capability 9.0 GPU), else as
// kFlashCudaTensorCoreConfig; kFlashCudaRowConfig (block_q 1, the
// default until a device check has passed the tensor-core kernels) always runs the CUDA-core
// kernels. All are in the tuning space, so the contract tests check each and cuda_bench times each.
#pragma once

#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe {

inline constexpr int64_t kFlashCudaMaxPerLane = 16;
inline constexpr FlashAttentionCpuConfig kFlashCudaRowConfig{1, 1};
inline constexpr FlashAttentionCpuConfig kFlashCudaTensorCoreConfig{64, 64};
inline constexpr FlashAttentionCpuConfig kFlashCudaWgmmaConfig{128, 128};

Impl<FlashAttentionArgs, FlashAttentionCpuConfig> flash_attention_cuda_impl();
Impl<FlashAttentionBackwardArgs, FlashAttentionCpuConfig> flash_attention_backward_cuda_impl();

}  // namespace lathe
