#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "lathe/core/error.h"
#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"

namespace lathe {
namespace {

using namespace mma;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * cuda::kWarp;
constexpr int kBlockQ = kWarps * kRowsPerWarp;  // queries per block
constexpr int kBlockK = 64;                     // keys per shared-memory tile
constexpr int kKeyTiles = kBlockK / 8;          // n-tiles of 8 keys in a score row

// Grid (query blocks, n_heads, batch), kWarps * 32 threads, kKeyValueStagesBytes<D, kBlockK> of
// dynamic shared memory (stage t: the K tile at 2t, the V tile at 2t + 1, each [key][D + kPad]).
// Rows are (batch, seq, heads, D).
template <int D>
__global__ void __launch_bounds__(kThreads)
    forward_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o, float* lse,
                MmaShapes s) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  const int lane = threadIdx.x % cuda::kWarp, quad = lane % 4;
  const QueryBlock<D, kBlockQ> block(s);
  uint32_t q_frag[D / 16][4];  // this lane's two query rows (zero past seq_q)
  load_a_fragments<D>(q_frag, q + block.q_offset, block.q_stride, block.rows, s.seq_q, quad);

  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f};  // max in log2 units
  float acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.0f;
  auto multiply = [&](int64_t tile_first, const __nv_bfloat16* k_tile, const __nv_bfloat16* v_tile) {
    float scores[kKeyTiles][4];  // S = Q K^T: 16 rows x 64 keys per warp
    multiply_by_rows<D, kBlockK>(scores, q_frag, k_tile, lane);

    online_softmax_tile<D, kBlockK>(scores, tile_first, block, s, quad, running_max, running_sum, acc);
    accumulate_product<D, kBlockK>(acc, scores, v_tile, lane);  // O += P V
  };
  for_each_key_tile<D, kBlockK>(shared_bytes, block, k, v, multiply);

  finish_forward_rows<D>(acc, running_max, running_sum, block, s, quad, o, lse);
}

}  // namespace

bool flash_attention_mma_applies(const FlashAttentionArgs& args) {
  return mma_shapes_apply(args.q, args.v) && aligned(args.q.data, 4) && aligned(args.k.data, 16) &&
         aligned(args.v.data, 16) && aligned(args.o.data, 4);
}

void flash_attention_forward_mma(const FlashAttentionArgs& args) {
  const MmaShapes s = mma_shapes(args.q, args.k, args.options);
  const int64_t batch = args.q.dim(0);
  if (batch == 0 || s.seq_q == 0 || s.n_heads == 0) return;
  const ForwardTensors t(args);
  constexpr const char* kOp = "flash_attention (cuda, tensor cores)";
  for_head_dim(args.q.dim(3), [&]<int D>() {
    constexpr int kBytes = kKeyValueStagesBytes<D, kBlockK>;
    allow_shared_bytes(forward_mma<D>, kBytes, kOp);
    forward_mma<D><<<row_block_grid(s.seq_q, kBlockQ, s.n_heads, batch), kThreads, kBytes, cuda::lathe_stream()>>>(
        t.q, t.k, t.v, t.o, t.lse, s);
  });
  LATHE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace lathe
