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
  const float score_scale = s.softcap > 0.0f ? s.scale : s.scale * kLog2e;

  auto multiply = [&](int64_t tile_first, const __nv_bfloat16* k_tile, const __nv_bfloat16* v_tile) {
    float scores[kKeyTiles][4];  // S = Q K^T: 16 rows x 64 keys per warp
    multiply_by_rows<D, kBlockK>(scores, q_frag, k_tile, lane);

    // Scale, soft-cap, mask; then the online softmax per row (the 4 lanes of a group share a row).
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        const int64_t key = tile_first + nt * 8 + quad * 2 + (e % 2);
        float x = scores[nt][e] * score_scale;
        if (s.softcap > 0.0f) x = s.softcap * tanhf(x / s.softcap) * kLog2e;
        scores[nt][e] = block.sees(r, key) ? x : -INFINITY;
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = running_max[r];
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt)
        tile_max = fmaxf(tile_max, fmaxf(scores[nt][2 * r], scores[nt][2 * r + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float base = tile_max == -INFINITY ? 0.0f : tile_max;  // a row with nothing visible yet
      const float correction = exp2f(running_max[r] - base);
      running_max[r] = tile_max;
      float sum = running_sum[r] * correction;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          scores[nt][2 * r + c] = exp2f(scores[nt][2 * r + c] - base);
          sum += scores[nt][2 * r + c];
        }
      running_sum[r] = sum;  // this lane's share; the group's lanes are summed at the end
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) acc[dn][2 * r] *= correction, acc[dn][2 * r + 1] *= correction;
    }

    accumulate_product<D, kBlockK>(acc, scores, v_tile, lane);  // O += P V
  };
  for_each_key_tile<D, kBlockK>(shared_bytes, block, k, v, multiply);

  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = running_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inverse[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
    if (block.rows[r] < s.seq_q && quad == 0)
      lse[(block.b * s.n_heads + block.h) * s.seq_q + block.rows[r]] =
          sum > 0.0f ? (running_max[r] + log2f(sum)) * kLn2 : -INFINITY;
  }
  store_rows<D>(o + block.q_offset, block.q_stride, acc, block.rows, s.seq_q, inverse, quad);
}

}  // namespace

bool flash_attention_mma_applies(const FlashAttentionArgs& args) {
  return mma_shapes_apply(args.q, args.v) && aligned(args.q.data, 4) && aligned(args.k.data, 16) &&
         aligned(args.v.data, 16) && aligned(args.o.data, 4);
}

void flash_attention_forward_mma(const FlashAttentionArgs& args) {
  const MmaShapes s = mma_shapes(args.q, args.k, args.options);
  const int64_t batch = args.q.dim(0), head_dim = args.q.dim(3);
  if (batch == 0 || s.seq_q == 0 || s.n_heads == 0) return;
  const dim3 grid(static_cast<unsigned>((s.seq_q + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(s.n_heads),
                  static_cast<unsigned>(batch));
  const auto* q = static_cast<const __nv_bfloat16*>(args.q.data);
  const auto* k = static_cast<const __nv_bfloat16*>(args.k.data);
  const auto* v = static_cast<const __nv_bfloat16*>(args.v.data);
  auto* o = static_cast<__nv_bfloat16*>(args.o.data);
  auto* lse = static_cast<float*>(args.lse.data);
  constexpr const char* kOp = "flash_attention (cuda, tensor cores)";
  auto launch = [&]<int D>() {
    constexpr int kBytes = kKeyValueStagesBytes<D, kBlockK>;
    allow_shared_bytes(forward_mma<D>, kBytes, kOp);
    forward_mma<D><<<grid, kThreads, kBytes, cuda::lathe_stream()>>>(q, k, v, o, lse, s);
  };
  if (head_dim == 64)
    launch.operator()<64>();
  else
    launch.operator()<128>();
  LATHE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace lathe
