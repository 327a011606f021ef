// The tensor-core attention forward's block on Hopper's warpgroup MMA (wgmma; the kernel in
// flash_attention_cuda_wgmma_sm90a.cu, its host emulation in flash_attention_cuda_emulated.cc; see
// flash_attention_cuda_mma.h for where it sits): 128 queries of one (batch, head), two warpgroups
// of 64, walking the keys 128 at a time.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/wgmma.cuh"
#include "lathe/device/wgmma_layout.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_wgmma.cuh"

namespace lathe::mma::wgmma_forward {

constexpr int kBlockQ = kWgmmaWarpgroups * kWarpgroupRows;  // 128 queries a block
constexpr int kBlockK = 128;                                // keys a tile: the N of S = Q K^T

// Shared memory: the Q tile, then two stages of a K and a V tile (stage t: K at 2t, V at 2t + 1),
// each kBlockQ = kBlockK rows of D bf16 in wgmma's layout (device/wgmma_layout.h), from a
// 1024-byte boundary (up to 1 KB of the allocation skipped to reach it).
template <int D>
constexpr int kTileBytes = kBlockK* D * 2;
template <int D>
constexpr int kSharedBytes = 5 * kTileBytes<D> + static_cast<int>(wgmma::kAtomBytes);

// Grid (query blocks of 128, n_heads, batch), kWgmmaThreads threads (two warpgroups of 64 queries;
// warp w holds queries 16 w .. + 15 of the block, as in the mma.sync forward, so the softmax and
// the epilogue are that kernel's), kSharedBytes<D> of dynamic shared memory at `shared_raw`. Per
// key tile each warpgroup computes S = Q K^T (64 x 128, f32) with D / 16 wgmma from shared memory,
// the online softmax in registers, and O += P V with P rounded to bf16 in registers and V read
// transposed (MN-major) from shared memory; the two warpgroups take turns issuing their products
// (TensorCoreTurns).
// Rows are (batch, seq, heads, D).
template <int D>
__device__ inline void forward_block(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                     __nv_bfloat16* o, float* lse, const MmaShapes& s, unsigned char* shared_raw) {
  unsigned char* q_tile = wgmma::align_to_atom(shared_raw);
  unsigned char* kv_tiles = q_tile + kTileBytes<D>;
  const uint32_t q_address = wgmma::shared_address(q_tile), kv_address = wgmma::shared_address(kv_tiles);

  const int lane = threadIdx.x % cuda::kWarp, quad = lane % 4;
  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads;
  const QueryBlock<D, kBlockQ> block(s);
  load_wgmma_tile_async<D, kBlockQ>(q_tile, q + block.q_offset, block.q_stride, block.first, s.seq_q);
  commit_async_copies();  // complete, and fenced for wgmma, with the first K/V tile (pipeline_tiles)

  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f};  // max in log2 units
  float acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.0f;

  const TensorCoreTurns turns(warpgroup);

  auto issue = [&](int64_t index, int stage) { load_key_value_stage<D, kBlockK>(kv_tiles, stage, index, block, k, v); };
  auto multiply = [&](int64_t index, int stage) {
    const uint32_t k_tile = kv_address + 2 * stage * kTileBytes<D>, v_tile = k_tile + kTileBytes<D>;
    float scores[kBlockK / 8][4];  // S = Q K^T: this warp's 16 rows of the warpgroup's 64 x 128
#pragma unroll
    for (int nt = 0; nt < kBlockK / 8; ++nt) scores[nt][0] = scores[nt][1] = scores[nt][2] = scores[nt][3] = 0.0f;
    wgmma::fence_operands(scores);
    turns.take();
    wgmma::fence();
#pragma unroll
    for (int step = 0; step < D / wgmma::kStepDepth; ++step)
      wgmma::multiply_ss<kBlockK>(scores,
                                  wgmma::k_major_descriptor(q_address, kBlockQ, warpgroup * kWarpgroupRows, step),
                                  wgmma::k_major_descriptor(k_tile, kBlockK, 0, step), step > 0);
    wgmma::commit();
    turns.pass();
    wgmma::wait<0>();
    wgmma::fence_operands(scores);

    online_softmax_tile<D, kBlockK>(scores, block.key_begin + index * kBlockK, block, s, quad, running_max, running_sum,
                                    acc);

    uint32_t p[kBlockK / 16][4];  // P rounded to bf16 as A operands, depth step t = keys 16 t ..
#pragma unroll
    for (int t = 0; t < kBlockK / 16; ++t) to_a_fragments(scores[2 * t], scores[2 * t + 1], p[t]);
    wgmma::fence_operands(acc);
    wgmma::fence_operands(p);
    turns.take();
    wgmma::fence();
#pragma unroll
    for (int t = 0; t < kBlockK / 16; ++t) {
      const uint64_t v_step = wgmma::mn_major_descriptor(v_tile, kBlockK, t);
      wgmma::multiply_rs<D>(acc, p[t], v_step, 1);
    }
    wgmma::commit();
    turns.pass();
    wgmma::wait<0>();
    wgmma::fence_operands(acc);
  };
  pipeline_tiles<true>((block.key_end - block.key_begin + kBlockK - 1) / kBlockK, issue, multiply);
  wait_async_copies<0>();  // the Q tile's copies where no key tile ran
  turns.finish();

  finish_forward_rows<D>(acc, running_max, running_sum, block, s, quad, o, lse);
}

}  // namespace lathe::mma::wgmma_forward
