#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "lathe/core/error.h"
#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"

namespace lathe {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 16;                // the M of one mma
constexpr int kBlockQ = kWarps * kRowsPerWarp;  // queries per block
constexpr int kBlockK = 64;                     // keys per shared-memory tile
constexpr int kKeyTiles = kBlockK / 8;          // n-tiles of 8 keys in a score row
constexpr int kPad = 8;                         // bf16 padding per shared row: conflict-free fragments
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct MmaShapes {
  int64_t seq_q, seq_k, n_heads, n_kv_heads;
  float scale, softcap;
  bool causal;
  int64_t window;
};

__device__ inline uint32_t bits_of(__nv_bfloat162 pair) { return *reinterpret_cast<uint32_t*>(&pair); }

// Two bf16 from two 16-bit shared-memory elements: `low` in the low half (the lower k index).
__device__ inline uint32_t pack_halves(__nv_bfloat16 low, __nv_bfloat16 high) {
  return bits_of(__halves2bfloat162(low, high));
}

// p0, p1 as hi = bf16(p) and lo = bf16(p - hi), each pair packed for an A fragment register.
__device__ inline void split_pair(float p0, float p1, uint32_t* hi, uint32_t* lo) {
  const __nv_bfloat162 high = __floats2bfloat162_rn(p0, p1);
  const float2 high_f32 = __bfloat1622float2(high);
  *hi = bits_of(high);
  *lo = bits_of(__floats2bfloat162_rn(p0 - high_f32.x, p1 - high_f32.y));
}

// c (16 x 8, f32) += a (16 x 16, bf16, row-major fragments) b (16 x 8, bf16, column fragments).
// Fragments (lane = 4 * group + quad): a[0] = A[group][2 quad, +1], a[1] = A[group + 8][2 quad, +1],
// a[2], a[3] the same at columns + 8; b0 = B[2 quad, +1][group], b1 = B[2 quad + 8, +9][group];
// c[0], c[1] = C[group][2 quad, +1], c[2], c[3] = C[group + 8][2 quad, +1].
__device__ inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ inline uint32_t load_pair(const __nv_bfloat16* address) {
  return *reinterpret_cast<const uint32_t*>(address);
}

// Grid (query blocks, n_heads, batch), kWarps * 32 threads. Rows are (batch, seq, heads, D).
template <int D>
__global__ void __launch_bounds__(kWarps * cuda::kWarp)
    forward_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                float* lse, MmaShapes s) {
  constexpr int kLd = D + kPad;
  __shared__ __align__(16) __nv_bfloat16 k_tile[kBlockK * kLd];  // [key][d]
  __shared__ __align__(16) __nv_bfloat16 v_tile[kBlockK * kLd];  // [key][d]
  const int warp = threadIdx.x / cuda::kWarp, lane = threadIdx.x % cuda::kWarp;
  const int group = lane / 4, quad = lane % 4;
  const int64_t h = blockIdx.y, b = blockIdx.z, kv_head = h / (s.n_heads / s.n_kv_heads);
  const int64_t q_stride = s.n_heads * D, kv_stride = s.n_kv_heads * D;
  const __nv_bfloat16* q_head = q + (b * s.seq_q * s.n_heads + h) * D;
  const __nv_bfloat16* k_head = k + (b * s.seq_k * s.n_kv_heads + kv_head) * D;
  const __nv_bfloat16* v_head = v + (b * s.seq_k * s.n_kv_heads + kv_head) * D;
  const int64_t block_first = blockIdx.x * int64_t{kBlockQ};
  const int64_t rows[2] = {block_first + warp * kRowsPerWarp + group, block_first + warp * kRowsPerWarp + group + 8};

  // This thread's two query rows: their visible keys, and their Q fragments (zero past seq_q).
  int64_t row_begin[2], row_end[2];
  uint32_t q_frag[D / 16][4];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_begin[r] = row_end[r] = 0;
    if (rows[r] < s.seq_q) visible_keys(s.causal, s.window, rows[r], s.seq_q, s.seq_k, &row_begin[r], &row_end[r]);
  }
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int part = 0; part < 4; ++part) {
      const int64_t row = rows[part % 2];
      const int column = kk * 16 + quad * 2 + (part / 2) * 8;
      q_frag[kk][part] = row < s.seq_q ? load_pair(q_head + row * q_stride + column) : 0u;
    }

  // The block's keys: from the first row's first visible key to the last row's end.
  const int64_t block_last = (block_first + kBlockQ < s.seq_q ? block_first + kBlockQ : s.seq_q) - 1;
  int64_t key_begin, unused_end, unused_begin, key_end;
  visible_keys(s.causal, s.window, block_first, s.seq_q, s.seq_k, &key_begin, &unused_end);
  visible_keys(s.causal, s.window, block_last, s.seq_q, s.seq_k, &unused_begin, &key_end);

  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f};  // max in log2 units
  float acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.0f;
  const float score_scale = s.softcap > 0.0f ? s.scale : s.scale * kLog2e;

  for (int64_t tile_first = key_begin; tile_first < key_end; tile_first += kBlockK) {
    __syncthreads();  // the previous tile is consumed
    constexpr int kChunksPerRow = D / 8;  // 16-byte chunks
    for (int chunk = threadIdx.x; chunk < kBlockK * kChunksPerRow; chunk += blockDim.x) {
      const int key_in_tile = chunk / kChunksPerRow, column = (chunk % kChunksPerRow) * 8;
      const int64_t key = tile_first + key_in_tile;
      uint4 k_chunk = make_uint4(0, 0, 0, 0), v_chunk = make_uint4(0, 0, 0, 0);
      if (key < key_end) {
        k_chunk = *reinterpret_cast<const uint4*>(k_head + key * kv_stride + column);
        v_chunk = *reinterpret_cast<const uint4*>(v_head + key * kv_stride + column);
      }
      *reinterpret_cast<uint4*>(&k_tile[key_in_tile * kLd + column]) = k_chunk;
      *reinterpret_cast<uint4*>(&v_tile[key_in_tile * kLd + column]) = v_chunk;
    }
    __syncthreads();

    // S = Q K^T: 16 rows x 64 keys per warp.
    float scores[kKeyTiles][4];
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) scores[nt][0] = scores[nt][1] = scores[nt][2] = scores[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
        const __nv_bfloat16* key_row = &k_tile[(nt * 8 + group) * kLd + kk * 16 + quad * 2];
        mma_bf16(scores[nt], q_frag[kk], load_pair(key_row), load_pair(key_row + 8));
      }

    // Scale, soft-cap, mask; then the online softmax per row (the 4 lanes of a group share a row).
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2;
        const int64_t key = tile_first + nt * 8 + quad * 2 + (e % 2);
        float x = scores[nt][e] * score_scale;
        if (s.softcap > 0.0f) x = s.softcap * tanhf(x / s.softcap) * kLog2e;
        scores[nt][e] = key >= row_begin[r] && key < row_end[r] ? x : -INFINITY;
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

    // O += P V, P as hi + lo bf16 terms; the C fragments of key tiles 2t and 2t + 1 are the A
    // fragment of depth step t.
#pragma unroll
    for (int t = 0; t < kBlockK / 16; ++t) {
      uint32_t p_hi[4], p_lo[4];
      split_pair(scores[2 * t][0], scores[2 * t][1], &p_hi[0], &p_lo[0]);
      split_pair(scores[2 * t][2], scores[2 * t][3], &p_hi[1], &p_lo[1]);
      split_pair(scores[2 * t + 1][0], scores[2 * t + 1][1], &p_hi[2], &p_lo[2]);
      split_pair(scores[2 * t + 1][2], scores[2 * t + 1][3], &p_hi[3], &p_lo[3]);
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        const __nv_bfloat16* value = &v_tile[(t * 16 + quad * 2) * kLd + dn * 8 + group];
        const uint32_t b0 = pack_halves(value[0], value[kLd]), b1 = pack_halves(value[8 * kLd], value[9 * kLd]);
        mma_bf16(acc[dn], p_hi, b0, b1);
        mma_bf16(acc[dn], p_lo, b0, b1);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = running_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (rows[r] >= s.seq_q) continue;
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
    __nv_bfloat16* out = o + ((b * s.seq_q + rows[r]) * s.n_heads + h) * D;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
      *reinterpret_cast<__nv_bfloat162*>(out + dn * 8 + quad * 2) =
          __floats2bfloat162_rn(acc[dn][2 * r] * inverse, acc[dn][2 * r + 1] * inverse);
    if (quad == 0)
      lse[(b * s.n_heads + h) * s.seq_q + rows[r]] = sum > 0.0f ? (running_max[r] + log2f(sum)) * kLn2 : -INFINITY;
  }
}

bool aligned(const void* pointer, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }

}  // namespace

bool flash_attention_mma_applies(const FlashAttentionArgs& args) {
  const int64_t head_dim = args.q.dim(3);
  return args.q.dtype == DType::bf16 && args.v.dim(3) == head_dim && (head_dim == 64 || head_dim == 128) &&
         aligned(args.q.data, 4) && aligned(args.k.data, 16) && aligned(args.v.data, 16) && aligned(args.o.data, 4) &&
         args.q.dim(0) <= 65535 && args.q.dim(2) <= 65535;
}

void flash_attention_forward_mma(const FlashAttentionArgs& args) {
  MmaShapes s{};
  s.seq_q = args.q.dim(1), s.seq_k = args.k.dim(1), s.n_heads = args.q.dim(2), s.n_kv_heads = args.k.dim(2);
  const int64_t batch = args.q.dim(0), head_dim = args.q.dim(3);
  s.scale = attention_scale(args.options, head_dim);
  s.softcap = args.options.softcap;
  s.causal = args.options.causal;
  s.window = args.options.window;
  if (batch == 0 || s.seq_q == 0 || s.n_heads == 0) return;
  const dim3 grid(static_cast<unsigned>((s.seq_q + kBlockQ - 1) / kBlockQ), static_cast<unsigned>(s.n_heads),
                  static_cast<unsigned>(batch));
  const auto* q = static_cast<const __nv_bfloat16*>(args.q.data);
  const auto* k = static_cast<const __nv_bfloat16*>(args.k.data);
  const auto* v = static_cast<const __nv_bfloat16*>(args.v.data);
  auto* o = static_cast<__nv_bfloat16*>(args.o.data);
  auto* lse = static_cast<float*>(args.lse.data);
  if (head_dim == 64)
    forward_mma<64><<<grid, kWarps * cuda::kWarp, 0, cuda::lathe_stream()>>>(q, k, v, o, lse, s);
  else
    forward_mma<128><<<grid, kWarps * cuda::kWarp, 0, cuda::lathe_stream()>>>(q, k, v, o, lse, s);
  LATHE_CUDA_CHECK_LAUNCH("flash_attention (cuda, tensor cores)");
}

}  // namespace lathe
