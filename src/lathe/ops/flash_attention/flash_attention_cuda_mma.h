// Flash attention forward and backward on tensor cores (flash_attention_cuda_mma.cu and
// flash_attention_cuda_mma_backward.cu; their shared pieces in flash_attention_cuda_mma.cuh): the
// CUDA implementation's fast path for bf16 q, k, v with head_dim == v_head_dim in {64, 128}; everything else runs the
// CUDA-core kernels of flash_attention_cuda.cu, which also serve as its reference on the device.
//
// FlashAttention-2's schedule with Ampere/Hopper `mma.sync.m16n8k16` (bf16 in, f32 accumulate):
// a block of 4 warps takes 64 queries of one head, each warp 16 of them with its Q fragments in
// registers; K and V pass through shared memory 64 keys at a time, two stages deep (cp.async
// brings tile t + 1 while tile t is multiplied). Per key tile a warp computes
// S = Q K^T (16 x 64, f32), masks (causal, window, sequence end), applies the scale and soft-cap,
// updates the online softmax in f32 (exp2 with log2(e) folded into the scores), and adds P V to
// its 16 x head_dim f32 accumulator. P enters the product rounded to bf16, as in FlashAttention and
// on the AMX tiles (flash_attention_amx_kernels.cc); the op's float baseline for bf16 inputs rounds
// it likewise (its tolerance rule).
// No atomics, a fixed order of every sum: bitwise reproducible.
#pragma once

#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe {

// Whether the tensor-core forward takes these arguments (dtype, head dims, alignment, grid).
bool flash_attention_mma_applies(const FlashAttentionArgs& args);
// Runs it on lathe's stream; requires flash_attention_mma_applies(args).
void flash_attention_forward_mma(const FlashAttentionArgs& args);

// The backward on tensor cores (flash_attention_cuda_mma_backward.cu), for the same arguments:
// two kernels, as the CUDA-core backward. The dq kernel (query-major, 16 queries a warp) computes
// D = rowsum(dO * O), then per key tile S = Q K^T, P = exp(S - lse), dP = dO V^T, dS = P (dP - D)
// and dQ += dS K; the dk/dv kernel (key-major, 16 keys a warp, every query head of the KV group in
// turn) computes S^T = K Q^T and dP^T = V dO^T per query tile and adds dV += P^T dO, dK += dS^T Q.
// P and dS enter their products rounded to bf16; tiles come through the forward's two-stage
// cp.async pipeline. No atomics, every sum in a fixed order.
bool flash_attention_backward_mma_applies(const FlashAttentionBackwardArgs& args);
void flash_attention_backward_mma(const FlashAttentionBackwardArgs& args);

// The forward on Hopper's warpgroup MMA (flash_attention_cuda_wgmma_sm90a.cu, compiled for sm_90a
// only, so it applies on a compute capability 9.0 GPU alone): the same schedule and numerics with
// blocks of 128 queries (two warpgroups of 64) and key tiles of 128. Q, K and V pass through
// shared memory in wgmma's swizzled layout (device/wgmma_layout.h; cp.async, two K/V stages);
// S = Q K^T is D / 16 `wgmma.m64n128k16` from shared memory per warpgroup, and O += P V takes P
// (rounded to bf16) from registers and V from shared memory read transposed. The two warpgroups
// take turns at the tensor cores (named barriers), so one's softmax overlaps the other's products.
bool flash_attention_wgmma_applies(const FlashAttentionArgs& args);
void flash_attention_forward_wgmma(const FlashAttentionArgs& args);
// The arguments its kernel takes, GPU aside (the tensor-core forward's, with q 16-byte aligned as
// well): flash_attention_wgmma_applies adds a compute capability 9.0 GPU; the host emulation
// (flash_attention_cuda_emulated.h) takes these.
bool flash_attention_wgmma_kernel_applies(const FlashAttentionArgs& args);
// The backward on wgmma (flash_attention_cuda_wgmma_backward_sm90a.cu): the two kernels above with
// blocks of 128 queries or keys (two warpgroups of 64) and the other side 64 at a time; each of
// S, dP (or S^T, dP^T) a wgmma from shared memory, dQ, dV and dK wgmma with the bf16 A operands
// in registers and Q, dO or K read transposed.
bool flash_attention_backward_wgmma_applies(const FlashAttentionBackwardArgs& args);
void flash_attention_backward_wgmma(const FlashAttentionBackwardArgs& args);

}  // namespace lathe
