// The CUDA implementations of flash_attention and flash_attention_backward
// (flash_attention_cuda.cu), registered by flash_attention.cc in builds with the CUDA backend.
//
// This is the correct-first version: CUDA cores, f32 math, one warp per query row (forward, dq) or
// key row (dk, dv), the online softmax of FlashAttention-2, every feature of the op (causal,
// sliding window, soft-cap, GQA, a v_head_dim of its own, f32 and bf16). Each lane holds
// head_dim / 32 query values and v_head_dim / 32 accumulators, so both dims are limited to
// 32 * kFlashCudaMaxPerLane = 512. No atomics: dq sums keys in order; dk and dv sum, in order, the
// query heads sharing the kv head and their queries (a second kernel per key row, using D and lse
// from the first), so results are bitwise reproducible. Tensor cores (mma / WGMMA) are the next
// step; the op contract tests check this one wherever a GPU is usable. The config (block_q,
// block_k) is not used on the GPU: its space is the default alone.
#pragma once

#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe {

inline constexpr int64_t kFlashCudaMaxPerLane = 16;

Impl<FlashAttentionArgs, FlashAttentionCpuConfig> flash_attention_cuda_impl();
Impl<FlashAttentionBackwardArgs, FlashAttentionCpuConfig> flash_attention_backward_cuda_impl();

}  // namespace lathe
