// The tensor-core attention backward's blocks (mma.sync; the kernels in
// flash_attention_cuda_mma_backward.cu, their host emulation in flash_attention_cuda_emulated.cc).
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"

namespace lathe::mma {

constexpr int kBackwardWarps = 4;
constexpr int kBackwardThreads = kBackwardWarps * cuda::kWarp;
constexpr int kBackwardBlockRows = kBackwardWarps * kRowsPerWarp;  // queries (dq) or keys (dk/dv) per block
constexpr int kBackwardBlockK = 64;                                // keys per shared tile in the dq kernel
// Queries per shared tile in the dk/dv kernel: 32 at head_dim 128 keeps its two accumulators, the
// K and V fragments and two score tiles within the 255 registers of a thread.
template <int D>
constexpr int kBackwardBlockQ = D == 128 ? 32 : 64;

// dq and D = rowsum(dO * O) (into `delta`, for the dk/dv kernel). Grid (query blocks, n_heads,
// batch), kBackwardThreads threads: each warp keeps 16 queries' Q and dO fragments and walks the
// keys they see, 64 at a time through shared memory: S = Q K^T, P = exp(S - lse), dP = dO V^T,
// dS = P (dP - D) cap' scale, dQ += dS K. kKeyValueStagesBytes<D, kBackwardBlockK> of shared
// memory at `shared_bytes`, as the forward.
template <int D>
__device__ inline void backward_dq_mma_block(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                             const __nv_bfloat16* o, const float* lse, const __nv_bfloat16* d_o,
                                             __nv_bfloat16* dq, float* delta, const MmaShapes& s,
                                             unsigned char* shared_bytes) {
  constexpr int kKeyTiles = kBackwardBlockK / 8;
  const int lane = threadIdx.x % cuda::kWarp, quad = lane % 4;
  const QueryBlock<D, kBackwardBlockRows> block(s);
  float row_delta[2], row_lse[2];  // row_lse in log2 units
  query_row_statistics<D>(block, s, o, d_o, lse, quad, delta, row_delta, row_lse);
  uint32_t q_frag[D / 16][4], do_frag[D / 16][4];
  load_a_fragments<D>(q_frag, q + block.q_offset, block.q_stride, block.rows, s.seq_q, quad);
  load_a_fragments<D>(do_frag, d_o + block.q_offset, block.q_stride, block.rows, s.seq_q, quad);

  float dq_acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) dq_acc[dn][0] = dq_acc[dn][1] = dq_acc[dn][2] = dq_acc[dn][3] = 0.0f;
  auto multiply = [&](int64_t tile_first, const __nv_bfloat16* k_tile, const __nv_bfloat16* v_tile) {
    float grad[kKeyTiles][4], dp[kKeyTiles][4];
    multiply_by_rows<D, kBackwardBlockK>(grad, q_frag, k_tile, lane);  // raw Q K^T
    multiply_by_rows<D, kBackwardBlockK>(dp, do_frag, v_tile, lane);   // dP = dO V^T
    score_gradients_by_query<kBackwardBlockK>(grad, dp, tile_first, block, s, quad, row_lse, row_delta);
    accumulate_product<D, kBackwardBlockK>(dq_acc, grad, k_tile, lane);  // dQ += dS K
  };
  for_each_key_tile<D, kBackwardBlockK>(shared_bytes, block, k, v, multiply);
  const float unit[2] = {1.0f, 1.0f};
  store_rows<D>(dq + block.q_offset, block.q_stride, dq_acc, block.rows, s.seq_q, unit, quad);
}

// The dk/dv kernel's shared memory: two stages of the Q and dO tiles ([query][d]) and the
// queries' lse (log2 units) and D.
template <int D>
struct DkdvShared {
  static constexpr int kQueries = kBackwardBlockQ<D>, kLd = D + kPad;
  __nv_bfloat16 q_tiles[2][kQueries * kLd];
  __nv_bfloat16 do_tiles[2][kQueries * kLd];
  float lse_tiles[2][kQueries], delta_tiles[2][kQueries];
};

// dk and dv. Grid (key blocks, n_kv_heads, batch), kBackwardThreads threads: each warp keeps 16
// keys' K and V fragments and, for each query head of the KV group, walks the queries that can see
// its block kBackwardBlockQ at a time through shared memory (`shared`: Q, dO, lse and D): S^T =
// K Q^T, P^T, dP^T = V dO^T, dS^T; dV += P^T dO, dK += dS^T Q.
template <int D>
__device__ inline void backward_dkdv_mma_block(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                               const float* lse, const __nv_bfloat16* d_o, const float* delta,
                                               __nv_bfloat16* dk, __nv_bfloat16* dv, const MmaShapes& s,
                                               DkdvShared<D>& shared) {
  constexpr int kQueries = kBackwardBlockQ<D>, kQueryTiles = kQueries / 8;
  const int lane = threadIdx.x % cuda::kWarp, quad = lane % 4;
  const KeyBlock<D, kBackwardBlockRows, kQueries> block(s);
  uint32_t k_frag[D / 16][4], v_frag[D / 16][4];
  load_a_fragments<D>(k_frag, k + block.kv_offset, block.kv_stride, block.keys, s.seq_k, quad);
  load_a_fragments<D>(v_frag, v + block.kv_offset, block.kv_stride, block.keys, s.seq_k, quad);

  float dk_acc[D / 8][4], dv_acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[dn][e] = dv_acc[dn][e] = 0.0f;
  auto issue = [&](int64_t index, int stage) {
    const int64_t first = block.first_of(index), q_offset = (block.b * s.seq_q * s.n_heads + block.head_of(index)) * D;
    load_tile_async<D, kQueries>(shared.q_tiles[stage], q + q_offset, block.q_stride, first, block.query_end);
    load_tile_async<D, kQueries>(shared.do_tiles[stage], d_o + q_offset, block.q_stride, first, block.query_end);
    load_query_statistics(block, s, index, lse, delta, shared.lse_tiles[stage], shared.delta_tiles[stage]);
  };
  auto multiply = [&](int64_t index, int stage) {
    const int64_t tile_first = block.first_of(index);
    const __nv_bfloat16* q_tile = shared.q_tiles[stage];
    const __nv_bfloat16* do_tile = shared.do_tiles[stage];
    float p[kQueryTiles][4], grad[kQueryTiles][4];
    multiply_by_rows<D, kQueries>(p, k_frag, q_tile, lane);      // raw K Q^T
    multiply_by_rows<D, kQueries>(grad, v_frag, do_tile, lane);  // dP^T = V dO^T
    score_gradients_by_key<kQueries>(p, grad, tile_first, block.query_end, block.keys, s, quad, shared.lse_tiles[stage],
                                     shared.delta_tiles[stage]);  // P^T, dS^T
    accumulate_product<D, kQueries>(dv_acc, p, do_tile, lane);    // dV += P^T dO
    accumulate_product<D, kQueries>(dk_acc, grad, q_tile, lane);  // dK += dS^T Q
  };
  pipeline_tiles(block.tiles(), issue, multiply);
  const float unit[2] = {1.0f, 1.0f};
  store_rows<D>(dk + block.kv_offset, block.kv_stride, dk_acc, block.keys, s.seq_k, unit, quad);
  store_rows<D>(dv + block.kv_offset, block.kv_stride, dv_acc, block.keys, s.seq_k, unit, quad);
}

}  // namespace lathe::mma
