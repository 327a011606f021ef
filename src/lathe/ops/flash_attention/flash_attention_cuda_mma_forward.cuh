// The tensor-core attention forward's block (mma.sync; the kernel in flash_attention_cuda_mma.cu,
// its host emulation in flash_attention_cuda_emulated.cc): one block of kBlockQ queries of one
// (batch, head), four warps of 16 query rows each, walking the keys kBlockK at a time.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"

namespace lathe::mma {

constexpr int kForwardWarps = 4;
constexpr int kForwardThreads = kForwardWarps * cuda::kWarp;
constexpr int kForwardBlockQ = kForwardWarps * kRowsPerWarp;  // queries per block
constexpr int kForwardBlockK = 64;                            // keys per shared-memory tile
constexpr int kForwardKeyTiles = kForwardBlockK / 8;          // n-tiles of 8 keys in a score row

// Grid (query blocks, n_heads, batch), kForwardThreads threads, kKeyValueStagesBytes<D,
// kForwardBlockK> of shared memory at `shared_bytes` (stage t: the K tile at 2t, the V tile at
// 2t + 1, each [key][D + kPad]). Rows are (batch, seq, heads, D).
template <int D>
__device__ inline void forward_mma_block(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                         __nv_bfloat16* o, float* lse, const MmaShapes& s,
                                         unsigned char* shared_bytes) {
  const int lane = threadIdx.x % cuda::kWarp, quad = lane % 4;
  const QueryBlock<D, kForwardBlockQ> block(s);
  uint32_t q_frag[D / 16][4];  // this lane's two query rows (zero past seq_q)
  load_a_fragments<D>(q_frag, q + block.q_offset, block.q_stride, block.rows, s.seq_q, quad);

  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f};  // max in log2 units
  float acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.0f;
  auto multiply = [&](int64_t tile_first, const __nv_bfloat16* k_tile, const __nv_bfloat16* v_tile) {
    float scores[kForwardKeyTiles][4];  // S = Q K^T: 16 rows x 64 keys per warp
    multiply_by_rows<D, kForwardBlockK>(scores, q_frag, k_tile, lane);

    online_softmax_tile<D, kForwardBlockK>(scores, tile_first, block, s, quad, running_max, running_sum, acc);
    accumulate_product<D, kForwardBlockK>(acc, scores, v_tile, lane);  // O += P V
  };
  for_each_key_tile<D, kForwardBlockK>(shared_bytes, block, k, v, multiply);

  finish_forward_rows<D>(acc, running_max, running_sum, block, s, quad, o, lse);
}

}  // namespace lathe::mma
