#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"

namespace lathe {
namespace {

using namespace mma;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * cuda::kWarp;
constexpr int kBlockRows = kWarps * kRowsPerWarp;  // queries (dq kernel) or keys (dk/dv kernel) per block
constexpr int kBlockK = 64;                        // keys per shared tile in the dq kernel
// Queries per shared tile in the dk/dv kernel: 32 at head_dim 128 keeps its two accumulators, the
// K and V fragments and two score tiles within the 255 registers of a thread.
template <int D>
constexpr int kBlockQ = D == 128 ? 32 : 64;

// dq and D = rowsum(dO * O) (into `delta`, for the dk/dv kernel). Grid (query blocks, n_heads,
// batch): each warp keeps 16 queries' Q and dO fragments and walks the keys they see, 64 at a time
// through shared memory: S = Q K^T, P = exp(S - lse), dP = dO V^T, dS = P (dP - D) cap' scale,
// dQ += dS K. kKeyValueStagesBytes<D, kBlockK> of dynamic shared memory, as the forward.
template <int D>
__global__ void __launch_bounds__(kThreads)
    backward_dq_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* o,
                    const float* lse, const __nv_bfloat16* d_o, __nv_bfloat16* dq, float* delta, MmaShapes s) {
  constexpr int kKeyTiles = kBlockK / 8;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  const int lane = threadIdx.x % cuda::kWarp, quad = lane % 4;
  const QueryBlock<D, kBlockRows> block(s);
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
    multiply_by_rows<D, kBlockK>(grad, q_frag, k_tile, lane);  // raw Q K^T
    multiply_by_rows<D, kBlockK>(dp, do_frag, v_tile, lane);   // dP = dO V^T
    score_gradients_by_query<kBlockK>(grad, dp, tile_first, block, s, quad, row_lse, row_delta);
    accumulate_product<D, kBlockK>(dq_acc, grad, k_tile, lane);  // dQ += dS K
  };
  for_each_key_tile<D, kBlockK>(shared_bytes, block, k, v, multiply);
  const float unit[2] = {1.0f, 1.0f};
  store_rows<D>(dq + block.q_offset, block.q_stride, dq_acc, block.rows, s.seq_q, unit, quad);
}

// dk and dv. Grid (key blocks, n_kv_heads, batch): each warp keeps 16 keys' K and V fragments and,
// for each query head of the KV group, walks the queries that can see its block kBlockQ at a time
// through shared memory (Q, dO, lse and D): S^T = K Q^T, P^T, dP^T = V dO^T, dS^T; dV += P^T dO,
// dK += dS^T Q.
template <int D>
__global__ void __launch_bounds__(kThreads)
    backward_dkdv_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const float* lse,
                      const __nv_bfloat16* d_o, const float* delta, __nv_bfloat16* dk, __nv_bfloat16* dv, MmaShapes s) {
  constexpr int kLd = D + kPad, kQueries = kBlockQ<D>, kQueryTiles = kQueries / 8;
  // Two stages of the Q and dO tiles ([query][d]) and the queries' lse (log2 units) and D.
  __shared__ __align__(16) __nv_bfloat16 q_tiles[2][kQueries * kLd];
  __shared__ __align__(16) __nv_bfloat16 do_tiles[2][kQueries * kLd];
  __shared__ float lse_tiles[2][kQueries], delta_tiles[2][kQueries];
  const int lane = threadIdx.x % cuda::kWarp, quad = lane % 4;
  const KeyBlock<D, kBlockRows, kQueries> block(s);
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
    load_tile_async<D, kQueries>(q_tiles[stage], q + q_offset, block.q_stride, first, block.query_end);
    load_tile_async<D, kQueries>(do_tiles[stage], d_o + q_offset, block.q_stride, first, block.query_end);
    load_query_statistics(block, s, index, lse, delta, lse_tiles[stage], delta_tiles[stage]);
  };
  auto multiply = [&](int64_t index, int stage) {
    const int64_t tile_first = block.first_of(index);
    const __nv_bfloat16* q_tile = q_tiles[stage];
    const __nv_bfloat16* do_tile = do_tiles[stage];
    float p[kQueryTiles][4], grad[kQueryTiles][4];
    multiply_by_rows<D, kQueries>(p, k_frag, q_tile, lane);      // raw K Q^T
    multiply_by_rows<D, kQueries>(grad, v_frag, do_tile, lane);  // dP^T = V dO^T
    score_gradients_by_key<kQueries>(p, grad, tile_first, block.query_end, block.keys, s, quad, lse_tiles[stage],
                                     delta_tiles[stage]);         // P^T, dS^T
    accumulate_product<D, kQueries>(dv_acc, p, do_tile, lane);    // dV += P^T dO
    accumulate_product<D, kQueries>(dk_acc, grad, q_tile, lane);  // dK += dS^T Q
  };
  pipeline_tiles(block.tiles(), issue, multiply);
  const float unit[2] = {1.0f, 1.0f};
  store_rows<D>(dk + block.kv_offset, block.kv_stride, dk_acc, block.keys, s.seq_k, unit, quad);
  store_rows<D>(dv + block.kv_offset, block.kv_stride, dv_acc, block.keys, s.seq_k, unit, quad);
}

}  // namespace

bool flash_attention_backward_mma_applies(const FlashAttentionBackwardArgs& args) {
  return mma_shapes_apply(args.q, args.v) && aligned(args.q.data, 16) && aligned(args.k.data, 16) &&
         aligned(args.v.data, 16) && aligned(args.d_o.data, 16) && aligned(args.o.data, 4) &&
         aligned(args.dq.data, 4) && aligned(args.dk.data, 4) && aligned(args.dv.data, 4);
}

void flash_attention_backward_mma(const FlashAttentionBackwardArgs& args) {
  const BackwardTensors t(args);
  constexpr const char* kOp = "flash_attention_backward (cuda, tensor cores)";
  run_backward_kernels(args, [&]<int D>(const MmaShapes& s, int64_t batch, float* delta) {
    if (s.seq_q > 0) {  // first: the dk/dv kernel reads its D
      constexpr int kBytes = kKeyValueStagesBytes<D, kBlockK>;
      allow_shared_bytes(backward_dq_mma<D>, kBytes, kOp);
      backward_dq_mma<D>
          <<<row_block_grid(s.seq_q, kBlockRows, s.n_heads, batch), kThreads, kBytes, cuda::lathe_stream()>>>(
              t.q, t.k, t.v, t.o, t.lse, t.d_o, t.dq, delta, s);
      LATHE_CUDA_CHECK_LAUNCH(kOp);
    }
    if (s.seq_k > 0) {
      backward_dkdv_mma<D>
          <<<row_block_grid(s.seq_k, kBlockRows, s.n_kv_heads, batch), kThreads, 0, cuda::lathe_stream()>>>(
              t.q, t.k, t.v, t.lse, t.d_o, delta, t.dk, t.dv, s);
      LATHE_CUDA_CHECK_LAUNCH(kOp);
    }
  });
}

}  // namespace lathe
