// The tensor-core attention backward's blocks on Hopper's warpgroup MMA (wgmma; the kernels in
// flash_attention_cuda_wgmma_backward_sm90a.cu, their host emulation in
// flash_attention_cuda_emulated.cc; see flash_attention_cuda_mma.h): the mma.sync backward's two
// kernels (no atomics, every sum in a fixed order) with each product a wgmma: blocks of 128 rows
// (two warpgroups of 64 queries or keys, taking turns at the tensor cores), the other side 64 at a
// time through two shared-memory stages.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/wgmma.cuh"
#include "lathe/device/wgmma_layout.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_wgmma.cuh"

namespace lathe::mma::wgmma_backward {

constexpr int kBlockRows = kWgmmaWarpgroups * kWarpgroupRows;  // queries (dq kernel) or keys (dk/dv kernel) a block
constexpr int kTileRows = 64;  // keys (dq kernel) or queries (dk/dv kernel) a shared tile: the products' N
constexpr int kTileSteps = kTileRows / wgmma::kStepDepth;

// Shared memory of both kernels, from a 1024-byte boundary: two blocks of kBlockRows x D (Q and dO,
// or K and V), then two stages of two tiles of kTileRows x D (K and V, or Q and dO: stage t's first
// at 2t, its second at 2t + 1), in wgmma's layout; the dk/dv kernel adds the query tiles' lse and D.
template <int D>
constexpr int kBlockBytes = kBlockRows* D * 2;
template <int D>
constexpr int kTileBytes = kTileRows* D * 2;
template <int D>
constexpr int kStatsOffset = 2 * kBlockBytes<D> + 4 * kTileBytes<D>;
template <int D>
constexpr int kSharedBytes = kStatsOffset<D> + 4 * kTileRows* static_cast<int>(sizeof(float)) +
                             static_cast<int>(wgmma::kAtomBytes);

// acc (64 x D) += a b over the tile's depth steps: the (bf16) A fragments of step t in a[t], b
// the MN-major tile (kTileRows x D, rows along the product's depth) at `tile`.
template <int D>
__device__ inline void accumulate_tile(float (&acc)[D / 8][4], const uint32_t (&a)[kTileSteps][4], uint32_t tile) {
#pragma unroll
  for (int t = 0; t < kTileSteps; ++t)
    wgmma::multiply_rs<D>(acc, a[t], wgmma::mn_major_descriptor(tile, kTileRows, t), 1);
}

// c (64 x kTileRows) = a b^T over depth D: a rows first_row .. + 63 of a block at `block`, b a tile
// at `tile`, both K-major.
template <int D>
__device__ inline void multiply_block_by_tile(float (&c)[kTileRows / 8][4], uint32_t block, int first_row,
                                              uint32_t tile) {
#pragma unroll
  for (int step = 0; step < D / wgmma::kStepDepth; ++step)
    wgmma::multiply_ss<kTileRows>(c, wgmma::k_major_descriptor(block, kBlockRows, first_row, step),
                                  wgmma::k_major_descriptor(tile, kTileRows, 0, step), step > 0);
}

template <int kTiles>
__device__ inline void zero(float (&c)[kTiles][4]) {
#pragma unroll
  for (int j = 0; j < kTiles; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f;
}

// Two score tiles from one sweep of wgmma: first = a1 b1^T, second = a2 b2^T (64 x kTileRows each;
// the a's rows first_row .. + 63 of their blocks), issued on this warpgroup's turn and waited for.
template <int D>
__device__ inline void two_products(float (&first)[kTileRows / 8][4], uint32_t a1, uint32_t b1,
                                    float (&second)[kTileRows / 8][4], uint32_t a2, uint32_t b2, int first_row,
                                    const TensorCoreTurns& turns) {
  zero(first);
  zero(second);
  wgmma::fence_operands(first);
  wgmma::fence_operands(second);
  turns.take();
  wgmma::fence();
  multiply_block_by_tile<D>(first, a1, first_row, b1);
  multiply_block_by_tile<D>(second, a2, first_row, b2);
  wgmma::commit();
  turns.pass();
  wgmma::wait<0>();
  wgmma::fence_operands(first);
  wgmma::fence_operands(second);
}

// The A fragments of each depth step of a 64 x kTileRows C-fragment tile, rounded to bf16.
__device__ inline void round_tile(const float (&c)[kTileRows / 8][4], uint32_t (&a)[kTileSteps][4]) {
#pragma unroll
  for (int t = 0; t < kTileSteps; ++t) to_a_fragments(c[2 * t], c[2 * t + 1], a[t]);
}

// dq and D = rowsum(dO * O) (into `delta`). Grid (query blocks of 128, n_heads, batch),
// kWgmmaThreads threads, kSharedBytes<D> at `shared_raw`: Q and dO of the block in shared memory,
// the keys they see 64 at a time: S = Q K^T and dP = dO V^T (wgmma from shared memory), dS = P (dP
// - D) cap' scale, dQ += dS K (dS rounded to bf16 in registers, K read transposed).
template <int D>
__device__ inline void dq_block(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* d_o, __nv_bfloat16* dq,
                                float* delta, const MmaShapes& s, unsigned char* shared_raw) {
  unsigned char* q_block = wgmma::align_to_atom(shared_raw);
  unsigned char* do_block = q_block + kBlockBytes<D>;
  unsigned char* kv_tiles = do_block + kBlockBytes<D>;
  const uint32_t q_address = wgmma::shared_address(q_block), do_address = wgmma::shared_address(do_block);
  const uint32_t kv_address = wgmma::shared_address(kv_tiles);
  const int quad = threadIdx.x % cuda::kWarp % 4;
  const int first_row = static_cast<int>(threadIdx.x) / kWarpgroupThreads * kWarpgroupRows;
  const QueryBlock<D, kBlockRows> block(s);
  load_wgmma_tile_async<D, kBlockRows>(q_block, q + block.q_offset, block.q_stride, block.first, s.seq_q);
  load_wgmma_tile_async<D, kBlockRows>(do_block, d_o + block.q_offset, block.q_stride, block.first, s.seq_q);
  commit_async_copies();  // complete, and fenced for wgmma, with the first K/V tile (pipeline_tiles)

  float row_delta[2], row_lse[2];  // row_lse in log2 units
  query_row_statistics<D>(block, s, o, d_o, lse, quad, delta, row_delta, row_lse);
  float dq_acc[D / 8][4];
  zero(dq_acc);
  const TensorCoreTurns turns(first_row / kWarpgroupRows);

  auto issue = [&](int64_t index, int stage) {
    load_key_value_stage<D, kTileRows>(kv_tiles, stage, index, block, k, v);
  };
  auto multiply = [&](int64_t index, int stage) {
    const uint32_t k_tile = kv_address + 2 * stage * kTileBytes<D>, v_tile = k_tile + kTileBytes<D>;
    float grad[kTileRows / 8][4], dp[kTileRows / 8][4];  // raw Q K^T, dP = dO V^T
    two_products<D>(grad, q_address, k_tile, dp, do_address, v_tile, first_row, turns);
    score_gradients_by_query<kTileRows>(grad, dp, block.key_begin + index * kTileRows, block, s, quad, row_lse,
                                        row_delta);  // dS
    uint32_t ds[kTileSteps][4];
    round_tile(grad, ds);
    wgmma::fence_operands(dq_acc);
    wgmma::fence_operands(ds);
    turns.take();
    wgmma::fence();
    accumulate_tile<D>(dq_acc, ds, k_tile);  // dQ += dS K
    wgmma::commit();
    turns.pass();
    wgmma::wait<0>();
    wgmma::fence_operands(dq_acc);
  };
  pipeline_tiles<true>((block.key_end - block.key_begin + kTileRows - 1) / kTileRows, issue, multiply);
  wait_async_copies<0>();  // the block's copies where no key tile ran
  turns.finish();
  const float unit[2] = {1.0f, 1.0f};
  store_rows<D>(dq + block.q_offset, block.q_stride, dq_acc, block.rows, s.seq_q, unit, quad);
}

// dk and dv. Grid (key blocks of 128, n_kv_heads, batch), kWgmmaThreads threads, kSharedBytes<D>
// at `shared_raw`: K and V of the block in shared memory; for each query head of the KV group, the
// queries that can see the block 64 at a time (Q, dO, lse and D): S^T = K Q^T, dP^T = V dO^T, P^T,
// dS^T; dV += P^T dO, dK += dS^T Q (P^T and dS^T rounded to bf16 in registers, dO and Q read
// transposed).
template <int D>
__device__ inline void dkdv_block(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                  const float* lse, const __nv_bfloat16* d_o, const float* delta, __nv_bfloat16* dk,
                                  __nv_bfloat16* dv, const MmaShapes& s, unsigned char* shared_raw) {
  unsigned char* k_block = wgmma::align_to_atom(shared_raw);
  unsigned char* v_block = k_block + kBlockBytes<D>;
  unsigned char* query_tiles = v_block + kBlockBytes<D>;
  float* stats = reinterpret_cast<float*>(k_block + kStatsOffset<D>);  // stage t: lse at 2t, D at 2t + 1
  const uint32_t k_address = wgmma::shared_address(k_block), v_address = wgmma::shared_address(v_block);
  const uint32_t query_address = wgmma::shared_address(query_tiles);
  const int warp = threadIdx.x / cuda::kWarp, quad = threadIdx.x % cuda::kWarp % 4;
  const int first_row = warp / 4 * kWarpgroupRows;
  const KeyBlock<D, kBlockRows, kTileRows> block(s);
  load_wgmma_tile_async<D, kBlockRows>(k_block, k + block.kv_offset, block.kv_stride, block.first, s.seq_k);
  load_wgmma_tile_async<D, kBlockRows>(v_block, v + block.kv_offset, block.kv_stride, block.first, s.seq_k);
  commit_async_copies();  // complete, and fenced for wgmma, with the first query tile (pipeline_tiles)

  float dk_acc[D / 8][4], dv_acc[D / 8][4];
  zero(dk_acc);
  zero(dv_acc);
  const TensorCoreTurns turns(warp / 4);
  auto issue = [&](int64_t index, int stage) {
    const int64_t first = block.first_of(index), q_offset = (block.b * s.seq_q * s.n_heads + block.head_of(index)) * D;
    unsigned char* q_tile = query_tiles + 2 * stage * kTileBytes<D>;
    load_wgmma_tile_async<D, kTileRows>(q_tile, q + q_offset, block.q_stride, first, block.query_end);
    load_wgmma_tile_async<D, kTileRows>(q_tile + kTileBytes<D>, d_o + q_offset, block.q_stride, first, block.query_end);
    float* lse_tile = stats + 2 * stage * kTileRows;
    load_query_statistics(block, s, index, lse, delta, lse_tile, lse_tile + kTileRows);
  };
  auto multiply = [&](int64_t index, int stage) {
    const uint32_t q_tile = query_address + 2 * stage * kTileBytes<D>, do_tile = q_tile + kTileBytes<D>;
    const float* lse_tile = stats + 2 * stage * kTileRows;
    float p[kTileRows / 8][4], grad[kTileRows / 8][4];  // raw K Q^T, dP^T = V dO^T
    two_products<D>(p, k_address, q_tile, grad, v_address, do_tile, first_row, turns);
    score_gradients_by_key<kTileRows>(p, grad, block.first_of(index), block.query_end, block.keys, s, quad, lse_tile,
                                      lse_tile + kTileRows);  // P^T, dS^T
    uint32_t p_t[kTileSteps][4], ds_t[kTileSteps][4];
    round_tile(p, p_t);
    round_tile(grad, ds_t);
    wgmma::fence_operands(dv_acc);
    wgmma::fence_operands(dk_acc);
    wgmma::fence_operands(p_t);
    wgmma::fence_operands(ds_t);
    turns.take();
    wgmma::fence();
    accumulate_tile<D>(dv_acc, p_t, do_tile);  // dV += P^T dO
    accumulate_tile<D>(dk_acc, ds_t, q_tile);  // dK += dS^T Q
    wgmma::commit();
    turns.pass();
    wgmma::wait<0>();
    wgmma::fence_operands(dv_acc);
    wgmma::fence_operands(dk_acc);
  };
  pipeline_tiles<true>(block.tiles(), issue, multiply);
  wait_async_copies<0>();  // the block's copies where no query tile ran
  turns.finish();
  const float unit[2] = {1.0f, 1.0f};
  store_rows<D>(dk + block.kv_offset, block.kv_stride, dk_acc, block.keys, s.seq_k, unit, quad);
  store_rows<D>(dv + block.kv_offset, block.kv_stride, dv_acc, block.keys, s.seq_k, unit, quad);
}

}  // namespace lathe::mma::wgmma_backward
