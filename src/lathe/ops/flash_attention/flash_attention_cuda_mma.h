// Flash attention forward on tensor cores (flash_attention_cuda_mma.cu): the CUDA implementation's
// fast path for bf16 q, k, v with head_dim == v_head_dim in {64, 128}; everything else runs the
// CUDA-core kernels of flash_attention_cuda.cu, which also serve as its reference on the device.
//
// FlashAttention-2's schedule with Ampere/Hopper `mma.sync.m16n8k16` (bf16 in, f32 accumulate):
// a block of 4 warps takes 64 queries of one head, each warp 16 of them with its Q fragments in
// registers; K and V pass through shared memory 64 keys at a time. Per key tile a warp computes
// S = Q K^T (16 x 64, f32), masks (causal, window, sequence end), applies the scale and soft-cap,
// updates the online softmax in f32 (exp2 with log2(e) folded into the scores), and adds P V to
// its 16 x head_dim f32 accumulator. P enters the product as two bf16 terms, hi = bf16(p) and
// lo = bf16(p - hi), as on the AMX tiles (flash_attention_amx_kernels.cc): one bf16 P would cost
// the output about 8 bits against the f32 math of every other path and the op's tolerance rule.
// No atomics, a fixed order of every sum: bitwise reproducible.
#pragma once

#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe {

// Whether the tensor-core forward takes these arguments (dtype, head dims, alignment, grid).
bool flash_attention_mma_applies(const FlashAttentionArgs& args);
// Runs it on lathe's stream; requires flash_attention_mma_applies(args).
void flash_attention_forward_mma(const FlashAttentionArgs& args);

}  // namespace lathe
