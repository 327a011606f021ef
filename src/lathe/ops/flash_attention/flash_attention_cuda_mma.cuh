// Building blocks of lathe's tensor-core attention kernels (flash_attention_cuda_mma.cu, the
// forward; flash_attention_cuda_mma_backward.cu): Ampere/Hopper `mma.sync.m16n8k16` on bf16 with
// f32 accumulation, its fragments, `ldmatrix` loads from padded shared tiles, and the two products
// every kernel is made of, and the host side of their launches. Include from .cu files only.
//
// Fragment layouts (lane = 4 * group + quad): an A fragment (16 x 16, k along the row) holds
// a[0] = A[group][2 quad, +1], a[1] = A[group + 8][2 quad, +1], a[2], a[3] the same at k + 8; a B
// fragment (16 x 8, k down the column) b0 = B[2 quad, +1][group], b1 = B[2 quad + 8, +9][group]; a C
// fragment (16 x 8, f32) c[0], c[1] = C[group][2 quad, +1], c[2], c[3] = C[group + 8][2 quad, +1].
// So the C fragments of n-tiles 2t and 2t + 1 are the A fragment of depth step t, which is how a
// probability tile computed by one product enters the next (to_a_fragments).
// Compiled by a host compiler (no __CUDACC__), the instruction wrappers take their emulated forms
// (warp collectives of device/simt_emulation.h implementing the layouts above), so the kernels
// run on the host under simt::launch (flash_attention_cuda_emulated.cc).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>
#if !defined(__CUDACC__)
#include "lathe/device/cp_async_emulation.h"
#include "lathe/device/cuda_host_emulation.h"
#endif

#include "lathe/core/tensor.h"
#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe::mma {

// What the kernels need of the arguments (rows are (batch, seq, heads, D), D = head_dim = v_head_dim).
struct MmaShapes {
  int64_t seq_q, seq_k, n_heads, n_kv_heads;
  float scale, softcap;
  bool causal;
  int64_t window;
};

// The kernels' view of q (batch, seq_q, n_heads, D) and k (batch, seq_k, n_kv_heads, D).
inline MmaShapes mma_shapes(const TensorView& q, const TensorView& k, const FlashAttentionOptions& options) {
  MmaShapes s{};
  s.seq_q = q.dim(1), s.seq_k = k.dim(1), s.n_heads = q.dim(2), s.n_kv_heads = k.dim(2);
  s.scale = attention_scale(options, q.dim(3));
  s.softcap = options.softcap;
  s.causal = options.causal;
  s.window = options.window;
  return s;
}

inline bool aligned(const void* pointer, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }

// What every tensor-core kernel needs of q and v: bf16, head_dim == v_head_dim in {64, 128}, and a
// batch and head count the grid can hold. (Each kernel adds its pointers' alignment.)
inline bool mma_shapes_apply(const TensorView& q, const TensorView& v) {
  const int64_t head_dim = q.dim(3);
  return q.dtype == DType::bf16 && v.dim(3) == head_dim && (head_dim == 64 || head_dim == 128) && q.dim(0) <= 65535 &&
         q.dim(2) <= 65535;
}

constexpr int kRowsPerWarp = 16;  // the M of one mma: the query (or key) rows of a warp
constexpr int kPad = 8;           // bf16 padding per shared row: 8 rows of a tile start in different banks
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

#if defined(__CUDACC__)
__device__ inline uint32_t bits_of(__nv_bfloat162 pair) { return *reinterpret_cast<uint32_t*>(&pair); }

__device__ inline uint32_t load_pair(const __nv_bfloat16* address) {
  return *reinterpret_cast<const uint32_t*>(address);
}
#else  // the host: the same bits without type punning
inline uint32_t bits_of(__nv_bfloat162 pair) {
  uint32_t bits;
  std::memcpy(&bits, &pair, sizeof(bits));
  return bits;
}
inline uint32_t load_pair(const __nv_bfloat16* address) {
  uint32_t bits;
  std::memcpy(&bits, address, sizeof(bits));
  return bits;
}
#endif

// p0, p1 rounded to bf16 (nearest even) and packed for an A fragment register: a computed
// probability or gradient enters its product as one bf16 term, as in FlashAttention (the op's
// float baseline for bf16 inputs rounds P and dS likewise; until 2026-12-06 they entered as hi +
// lo terms, twice the tensor-core work of those products).
__device__ inline uint32_t round_pair(float p0, float p1) { return bits_of(__floats2bfloat162_rn(p0, p1)); }

// The A fragment of depth step t from the C fragments of n-tiles 2t (left) and 2t + 1, rounded.
__device__ inline void to_a_fragments(const float (&left)[4], const float (&right)[4], uint32_t (&a)[4]) {
  a[0] = round_pair(left[0], left[1]);
  a[1] = round_pair(left[2], left[3]);
  a[2] = round_pair(right[0], right[1]);
  a[3] = round_pair(right[2], right[3]);
}

#if !defined(__CUDACC__)
// The emulated instructions: each lane's operands in, the warp's result computed once by the last
// lane to arrive, each lane's share out (the layouts at the top of this file).
namespace emulated {

inline float bf16_bits_to_float(uint32_t bits16) {
  const uint32_t bits = bits16 << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}
inline float low_half(uint32_t pair) { return bf16_bits_to_float(pair & 0xffffu); }
inline float high_half(uint32_t pair) { return bf16_bits_to_float(pair >> 16); }

struct MmaLane {
  uint32_t a[4], b[2];
  float c[4];
};
struct Accumulator {
  float c[4];
};
// d = a b + c over the warp: a 16 x 16 and b 16 x 8 from the lanes' fragments, products exact in
// f32 (bf16 x bf16), summed over k in order onto c.
inline void mma_m16n8k16(const MmaLane (&lanes)[simt::kWarpSize], Accumulator (&out)[simt::kWarpSize]) {
  float a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < simt::kWarpSize; ++lane) {
    const int group = lane / 4, quad = lane % 4;
    const MmaLane& in = lanes[lane];
    for (int part = 0; part < 4; ++part) {
      const int row = group + (part % 2) * 8, column = 2 * quad + (part / 2) * 8;
      a[row][column] = low_half(in.a[part]), a[row][column + 1] = high_half(in.a[part]);
    }
    for (int part = 0; part < 2; ++part) {
      const int k = 2 * quad + part * 8;
      b[k][group] = low_half(in.b[part]), b[k + 1][group] = high_half(in.b[part]);
    }
    for (int e = 0; e < 4; ++e) c[group + (e / 2) * 8][2 * quad + e % 2] = in.c[e];
  }
  for (int lane = 0; lane < simt::kWarpSize; ++lane) {
    const int group = lane / 4, quad = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = group + (e / 2) * 8, column = 2 * quad + e % 2;
      float sum = c[row][column];
      for (int k = 0; k < 16; ++k) sum += a[row][k] * b[k][column];
      out[lane].c[e] = sum;
    }
  }
}

struct Words {
  uint32_t r[4];
};
// ldmatrix .x4: lane l addresses row l % 8 of matrix l / 8 (8 bf16, 16 bytes each).
template <bool kTransposed>
inline void load_matrices_x4(const __nv_bfloat16* const (&rows)[simt::kWarpSize], Words (&out)[simt::kWarpSize]) {
  for (int lane = 0; lane < simt::kWarpSize; ++lane) {
    const int group = lane / 4, quad = lane % 4;
    for (int matrix = 0; matrix < 4; ++matrix) {
      const __nv_bfloat16* const* m = rows + matrix * 8;
      uint16_t low, high;
      if (kTransposed) {  // (row 2 quad, column group), (row 2 quad + 1, column group)
        std::memcpy(&low, m[2 * quad] + group, 2);
        std::memcpy(&high, m[2 * quad + 1] + group, 2);
      } else {  // (row group, columns 2 quad, 2 quad + 1)
        std::memcpy(&low, m[group] + 2 * quad, 2);
        std::memcpy(&high, m[group] + 2 * quad + 1, 2);
      }
      out[lane].r[matrix] = uint32_t{low} | uint32_t{high} << 16;
    }
  }
}

}  // namespace emulated
#endif

// c (16 x 8, f32) += a (16 x 16, bf16) b (16 x 8, bf16).
__device__ inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if !defined(__CUDACC__)
  const emulated::MmaLane in{{a[0], a[1], a[2], a[3]}, {b0, b1}, {c[0], c[1], c[2], c[3]}};
  const auto out = simt::collective<emulated::MmaLane, emulated::Accumulator>(in, emulated::mma_m16n8k16);
  for (int e = 0; e < 4; ++e) c[e] = out.c[e];
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Four 8 x 8 bf16 matrices from shared memory in one instruction: lanes 8i .. 8i + 7 give the
// addresses of matrix i's rows (16 bytes each, 16-byte aligned); r[i] receives matrix i's element
// pair at (row group, columns 2 quad, +1): a B fragment whose k runs along the stored row. The
// .trans form transposes each matrix first: r[i] = (row 2 quad, column group) and (row 2 quad + 1,
// column group), a B fragment whose k runs down the stored rows.
#if !defined(__CUDACC__)
template <bool kTransposed>
inline void load_matrices_emulated(uint32_t (&r)[4], const __nv_bfloat16* row_address) {
  simt::note_shared_read(row_address, 16);
  const auto out =
      simt::collective<const __nv_bfloat16*, emulated::Words>(row_address, emulated::load_matrices_x4<kTransposed>);
  for (int i = 0; i < 4; ++i) r[i] = out.r[i];
}
inline void load_matrices(uint32_t (&r)[4], const __nv_bfloat16* row_address) {
  load_matrices_emulated<false>(r, row_address);
}
inline void load_matrices_transposed(uint32_t (&r)[4], const __nv_bfloat16* row_address) {
  load_matrices_emulated<true>(r, row_address);
}
#else
__device__ inline void load_matrices(uint32_t (&r)[4], const __nv_bfloat16* row_address) {
  const auto shared = static_cast<uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared)
               : "memory");
}
__device__ inline void load_matrices_transposed(uint32_t (&r)[4], const __nv_bfloat16* row_address) {
  const auto shared = static_cast<uint32_t>(__cvta_generic_to_shared(row_address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared)
               : "memory");
}
#endif

// The A fragments (16 rows x D, k along the row) of rows rows[0] (this lane's group) and rows[1]
// (group + 8) of a bf16 matrix whose rows are `stride` elements apart from `base`; zero at rows >=
// limit. 4-byte aligned rows suffice.
template <int D>
__device__ inline void load_a_fragments(uint32_t (&frag)[D / 16][4], const __nv_bfloat16* base, int64_t stride,
                                        const int64_t (&rows)[2], int64_t limit, int quad) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int part = 0; part < 4; ++part) {
      const int64_t row = rows[part % 2];
      const int column = kk * 16 + quad * 2 + (part / 2) * 8;
      frag[kk][part] = row < limit ? load_pair(base + row * stride + column) : 0u;
    }
}

// cp.async (sm_80+): 16 bytes from global to shared memory without passing through registers, so
// the next tile's loads run while the current tile is multiplied; `bytes` 0 writes zeros.
// (Emulated: device/cp_async_emulation.h, asynchronous as here.)
#if !defined(__CUDACC__)
inline void copy_async_16(void* shared_destination, const void* global_source, int bytes) {
  cp_async_emulation::copy_16(shared_destination, global_source, bytes);
}
inline void commit_async_copies() { cp_async_emulation::commit(); }
template <int kPending>
inline void wait_async_copies() {
  cp_async_emulation::wait(kPending);
}
#else
__device__ inline void copy_async_16(void* shared_destination, const void* global_source, int bytes) {
  const auto destination = static_cast<uint32_t>(__cvta_generic_to_shared(shared_destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(global_source), "r"(bytes)
               : "memory");
}
__device__ inline void commit_async_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most kPending of this thread's committed copy groups are still in flight.
template <int kPending>
__device__ inline void wait_async_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
#endif

// Rows [first, first + kRows) of a bf16 matrix (rows `stride` elements apart from `head`, 16-byte
// aligned) into `tile` ([row][D + kPad]) in 16-byte cp.async copies by the whole block, zeros at rows
// >= end; issues the copies and returns (commit, wait and __syncthreads follow: pipeline_tiles).
template <int D, int kRows>
__device__ inline void load_tile_async(__nv_bfloat16* tile, const __nv_bfloat16* head, int64_t stride, int64_t first,
                                       int64_t end) {
  constexpr int kChunksPerRow = D / 8, kLd = D + kPad;
  for (int chunk = threadIdx.x; chunk < kRows * kChunksPerRow; chunk += blockDim.x) {
    const int row = chunk / kChunksPerRow, column = (chunk % kChunksPerRow) * 8;
    const bool inside = first + row < end;
    copy_async_16(&tile[row * kLd + column], inside ? head + (first + row) * stride + column : head, inside ? 16 : 0);
  }
}

// The shared memory of the query-major kernels: two stages of a K and a V tile of kKeys keys.
template <int D, int kKeys>
constexpr int kKeyValueStagesBytes = (D + kPad) * kKeys * 8;  // 2 stages x (K, V) x 2-byte elements

// The host side of the launches. The tensors as the kernels take them (bf16 q, k, v, o, dO and
// gradients; f32 lse).
struct ForwardTensors {
  const __nv_bfloat16 *q, *k, *v;
  __nv_bfloat16* o;
  float* lse;
  explicit ForwardTensors(const FlashAttentionArgs& args)
      : q(static_cast<const __nv_bfloat16*>(args.q.data)),
        k(static_cast<const __nv_bfloat16*>(args.k.data)),
        v(static_cast<const __nv_bfloat16*>(args.v.data)),
        o(static_cast<__nv_bfloat16*>(args.o.data)),
        lse(static_cast<float*>(args.lse.data)) {}
};
struct BackwardTensors {
  const __nv_bfloat16 *q, *k, *v, *o, *d_o;
  const float* lse;
  __nv_bfloat16 *dq, *dk, *dv;
  explicit BackwardTensors(const FlashAttentionBackwardArgs& args)
      : q(static_cast<const __nv_bfloat16*>(args.q.data)),
        k(static_cast<const __nv_bfloat16*>(args.k.data)),
        v(static_cast<const __nv_bfloat16*>(args.v.data)),
        o(static_cast<const __nv_bfloat16*>(args.o.data)),
        d_o(static_cast<const __nv_bfloat16*>(args.d_o.data)),
        lse(static_cast<const float*>(args.lse.data)),
        dq(static_cast<__nv_bfloat16*>(args.dq.data)),
        dk(static_cast<__nv_bfloat16*>(args.dk.data)),
        dv(static_cast<__nv_bfloat16*>(args.dv.data)) {}
};

// Grid (blocks of block_rows along `length` rows, heads, batch).
inline dim3 row_block_grid(int64_t length, int block_rows, int64_t heads, int64_t batch) {
  return dim3(static_cast<unsigned>((length + block_rows - 1) / block_rows), static_cast<unsigned>(heads),
              static_cast<unsigned>(batch));
}

// launch.template operator()<D>() for head_dim 64 or 128 (mma_shapes_apply allows no other).
template <class Launch>
inline void for_head_dim(int64_t head_dim, Launch&& launch) {
  if (head_dim == 64)
    launch.template operator()<64>();
  else
    launch.template operator()<128>();
}

// The backwards' entry: D's buffer ((batch, n_heads, seq_q) f32, which the dq kernel writes and
// the dk/dv kernel reads), then launch.template operator()<D>(shapes, batch, delta).
template <class Launch>
inline void run_backward_kernels(const FlashAttentionBackwardArgs& args, Launch&& launch) {
  const MmaShapes s = mma_shapes(args.q, args.k, args.options);
  const int64_t batch = args.q.dim(0);
  if (batch == 0 || s.n_heads == 0) return;
  Tensor delta = cuda::device_empty({batch, s.n_heads, s.seq_q}, DType::f32, "flash_attention_backward D");
  auto* delta_data = static_cast<float*>(delta.view().data);
  for_head_dim(args.q.dim(3), [&]<int D>() { launch.template operator()<D>(s, batch, delta_data); });
}

// Allows `kernel` `bytes` of dynamic shared memory (above 48 KB a kernel must ask).
template <class Kernel>
inline void allow_shared_bytes(Kernel kernel, int bytes, const char* op) {
  LATHE_CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// The two-stage tile pipeline of every kernel here: body(index, stage) runs for index = 0 ..
// count - 1 on tile `index`, which issue(index, stage) brought into stage index % 2 (cp.async
// copies, or plain shared stores) one iteration earlier: tile index + 1 is in flight while tile
// index is multiplied. Each stage is refilled only after every thread has left the body that read
// it (the barrier after body).
// kAsyncProxyReads: the body reads the tiles with wgmma (the async proxy), so each thread fences its
// copies into it before the barrier.
template <bool kAsyncProxyReads = false, class Issue, class Body>
__device__ inline void pipeline_tiles(int64_t count, Issue&& issue, Body&& body) {
  if (count > 0) issue(int64_t{0}, 0);
  commit_async_copies();
  for (int64_t index = 0; index < count; ++index) {
    const int stage = static_cast<int>(index % 2);
    if (index + 1 < count) issue(index + 1, stage ^ 1);
    commit_async_copies();   // (an empty group on the last tile keeps the count of pending groups)
    wait_async_copies<1>();  // this tile's copies, by this thread
#if defined(__CUDACC__)
    if constexpr (kAsyncProxyReads) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
    if constexpr (kAsyncProxyReads) cp_async_emulation::fence_proxy_async();
#endif
    __syncthreads();  // ... and by every thread
    body(index, stage);
    __syncthreads();
  }
}

// c = a tile^T: a is this warp's 16 x D operand in A fragments, tile a shared [n][D + kPad] of kN
// rows; c (16 x kN) in C fragments, n-tile nt holding tile rows nt * 8 .. + 7. One ldmatrix gives
// the B fragments of n-tiles nt and nt + 1 at depth step kk: matrix i = tile rows (nt + i / 2) * 8
// + row, columns kk * 16 + (i % 2) * 8.
template <int D, int kN>
__device__ inline void multiply_by_rows(float (&c)[kN / 8][4], const uint32_t (&a)[D / 16][4],
                                        const __nv_bfloat16* tile, int lane) {
  static_assert(kN % 16 == 0 && D % 16 == 0, "whole n-tile pairs and depth steps");
  constexpr int kLd = D + kPad;
  const int matrix = lane / 8, matrix_row = lane % 8;
#pragma unroll
  for (int nt = 0; nt < kN / 8; ++nt) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
    for (int nt = 0; nt < kN / 8; nt += 2) {
      uint32_t b[4];
      load_matrices(b, &tile[((nt + matrix / 2) * 8 + matrix_row) * kLd + kk * 16 + (matrix % 2) * 8]);
      mma_bf16(c[nt], a[kk], b[0], b[1]);
      mma_bf16(c[nt + 1], a[kk], b[2], b[3]);
    }
}

// acc (16 x D) += p tile: p is this warp's 16 x kN f32 operand in C fragments (a probability or
// gradient tile), entering rounded to bf16; tile a shared [kN][D + kPad]. One transposing
// ldmatrix gives the B fragments of output columns dn and dn + 1 at depth step t: matrix i = tile
// rows t * 16 + (i % 2) * 8 + row, columns (dn + i / 2) * 8.
template <int D, int kN>
__device__ inline void accumulate_product(float (&acc)[D / 8][4], const float (&p)[kN / 8][4],
                                          const __nv_bfloat16* tile, int lane) {
  static_assert(kN % 16 == 0 && D % 16 == 0, "whole depth steps and output column pairs");
  constexpr int kLd = D + kPad;
  const int matrix = lane / 8, matrix_row = lane % 8;
#pragma unroll
  for (int t = 0; t < kN / 16; ++t) {
    uint32_t a[4];
    to_a_fragments(p[2 * t], p[2 * t + 1], a);
#pragma unroll
    for (int dn = 0; dn < D / 8; dn += 2) {
      uint32_t b[4];
      load_matrices_transposed(b, &tile[(t * 16 + (matrix % 2) * 8 + matrix_row) * kLd + (dn + matrix / 2) * 8]);
      mma_bf16(acc[dn], a, b[0], b[1]);
      mma_bf16(acc[dn + 1], a, b[2], b[3]);
    }
  }
}

// Where a block of a query-major kernel (the forward, the dq kernel) stands: grid (query blocks of
// kBlockRows, n_heads, batch), 16 queries a warp; this lane's two rows (its group's and 8 below),
// the keys each sees, and the keys of the whole block (the first row's first to the last row's end).
template <int D, int kBlockRows>
struct QueryBlock {
  int64_t h, b, kv_head;
  int64_t q_stride, kv_stride;  // elements between consecutive positions' rows
  int64_t q_offset, kv_offset;  // of (b, position 0, h) in q, o, dO, dq and of (b, 0, kv_head) in k, v
  int64_t first;                // the block's first query
  int64_t rows[2], row_begin[2], row_end[2];
  int64_t key_begin, key_end;

  __device__ explicit QueryBlock(const MmaShapes& s) {
    h = blockIdx.y, b = blockIdx.z, kv_head = h / (s.n_heads / s.n_kv_heads);
    q_stride = s.n_heads * D, kv_stride = s.n_kv_heads * D;
    q_offset = (b * s.seq_q * s.n_heads + h) * D, kv_offset = (b * s.seq_k * s.n_kv_heads + kv_head) * D;
    // Causal: the last query blocks see the most keys, so they take the first block indices and
    // start first (a shorter tail of lone long blocks at the grid's end).
    const int64_t index = s.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    first = index * int64_t{kBlockRows};
    const int warp = threadIdx.x / cuda::kWarp, lane = threadIdx.x % cuda::kWarp;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      rows[r] = first + warp * kRowsPerWarp + lane / 4 + 8 * r;
      row_begin[r] = row_end[r] = 0;  // past seq_q: no keys
      if (rows[r] < s.seq_q) visible_keys(s.causal, s.window, rows[r], s.seq_q, s.seq_k, &row_begin[r], &row_end[r]);
    }
    const int64_t last = (first + kBlockRows < s.seq_q ? first + kBlockRows : s.seq_q) - 1;
    int64_t unused_end, unused_begin;
    visible_keys(s.causal, s.window, first, s.seq_q, s.seq_k, &key_begin, &unused_end);
    visible_keys(s.causal, s.window, last, s.seq_q, s.seq_k, &unused_begin, &key_end);
  }
  __device__ bool sees(int r, int64_t key) const { return key >= row_begin[r] && key < row_end[r]; }
};

// Where a block of a key-major kernel (the dk/dv kernels) stands: grid (key blocks of kBlockRows,
// n_kv_heads, batch), 16 keys a warp; this lane's two keys (its group's and 8 below), the queries
// that can see any of the block's keys, and the walk over them kQueries at a time: tile `index` is
// of query head head_of(index) (each head of the KV group in turn), from query first_of(index).
template <int D, int kBlockRows, int kQueries>
struct KeyBlock {
  int64_t g, b, group_heads;
  int64_t q_stride, kv_stride;  // elements between consecutive positions' rows
  int64_t kv_offset;            // of (b, position 0, g) in k, v, dk, dv
  int64_t first;                // the block's first key
  int64_t keys[2];
  int64_t query_first, query_end, per_head;  // per_head: query tiles of one head

  __device__ explicit KeyBlock(const MmaShapes& s) {
    g = blockIdx.y, b = blockIdx.z, group_heads = s.n_heads / s.n_kv_heads;
    q_stride = s.n_heads * D, kv_stride = s.n_kv_heads * D;
    kv_offset = (b * s.seq_k * s.n_kv_heads + g) * D;
    first = blockIdx.x * int64_t{kBlockRows};
    const int warp = threadIdx.x / cuda::kWarp, lane = threadIdx.x % cuda::kWarp;
    keys[0] = first + warp * kRowsPerWarp + lane / 4, keys[1] = keys[0] + 8;
    const int64_t end = first + kBlockRows < s.seq_k ? first + kBlockRows : s.seq_k;
    queries_seeing_keys(s.causal, s.window, first, end, s.seq_q, s.seq_k, &query_first, &query_end);
    per_head = query_end > query_first ? (query_end - query_first + kQueries - 1) / kQueries : 0;
  }
  __device__ int64_t tiles() const { return group_heads * per_head; }
  __device__ int64_t head_of(int64_t index) const { return g * group_heads + index / per_head; }
  __device__ int64_t first_of(int64_t index) const { return query_first + index % per_head * kQueries; }
};

// A key-major kernel's per-query statistics of query tile `index`, by the whole block: lse (log2
// units) and D of its kQueries queries into lse_tile and delta_tile (zeros past query_end).
template <int D, int kBlockRows, int kQueries>
__device__ inline void load_query_statistics(const KeyBlock<D, kBlockRows, kQueries>& block, const MmaShapes& s,
                                             int64_t index, const float* lse, const float* delta, float* lse_tile,
                                             float* delta_tile) {
  const int64_t first = block.first_of(index), stats = (block.b * s.n_heads + block.head_of(index)) * s.seq_q;
  for (int t = threadIdx.x; t < kQueries; t += blockDim.x) {
    const bool inside = first + t < block.query_end;
    lse_tile[t] = inside ? lse[stats + first + t] * kLog2e : 0.0f;
    delta_tile[t] = inside ? delta[stats + first + t] : 0.0f;
  }
}

// The query-major kernels' walk over the block's keys, kKeys at a time: the K and V tiles of keys
// key_begin + index * kKeys .. through the two-stage pipeline in `shared` (kKeyValueStagesBytes<D,
// kKeys>: stage t holds the K tile at 2t, the V tile at 2t + 1), then body(tile_first, k_tile,
// v_tile) on each.
template <int D, int kKeys, int kBlockRows, class Body>
__device__ inline void for_each_key_tile(unsigned char* shared, const QueryBlock<D, kBlockRows>& block,
                                         const __nv_bfloat16* k, const __nv_bfloat16* v, Body&& body) {
  constexpr int kTile = kKeys * (D + kPad);
  auto* tiles = reinterpret_cast<__nv_bfloat16*>(shared);
  auto issue = [&](int64_t index, int stage) {
    const int64_t first = block.key_begin + index * kKeys;
    load_tile_async<D, kKeys>(tiles + 2 * stage * kTile, k + block.kv_offset, block.kv_stride, first, block.key_end);
    load_tile_async<D, kKeys>(tiles + (2 * stage + 1) * kTile, v + block.kv_offset, block.kv_stride, first,
                              block.key_end);
  };
  auto run = [&](int64_t index, int stage) {
    body(block.key_begin + index * kKeys, tiles + 2 * stage * kTile, tiles + (2 * stage + 1) * kTile);
  };
  pipeline_tiles((block.key_end - block.key_begin + kKeys - 1) / kKeys, issue, run);
}

// Stores rows rows[0], rows[1] (< limit) of a 16 x D f32 C-fragment accumulator, times `scale`
// per row, as bf16 into a matrix whose rows are `stride` elements apart from `base`.
template <int D>
__device__ inline void store_rows(__nv_bfloat16* base, int64_t stride, const float (&acc)[D / 8][4],
                                  const int64_t (&rows)[2], int64_t limit, const float (&scale)[2], int quad) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= limit) continue;
    __nv_bfloat16* out = base + rows[r] * stride;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
      *reinterpret_cast<__nv_bfloat162*>(out + dn * 8 + quad * 2) =
          __floats2bfloat162_rn(acc[dn][2 * r] * scale[r], acc[dn][2 * r + 1] * scale[r]);
  }
}

// One key tile's step of the online softmax for a warp's 16 query rows (the forwards' shared
// core): scores (16 x kN from tile_first on, C fragments) are scaled, soft-capped and masked into
// log2 units and replaced by P = exp2(S - row max); running_max (log2 units) takes the tile's max,
// running_sum (this lane's share; the 4 lanes of a group share a row) adds P's row sums, and acc
// (16 x D, the P V accumulator) is rescaled by exp2(old max - new max).
template <int D, int kN, class Block>
__device__ inline void online_softmax_tile(float (&scores)[kN / 8][4], int64_t tile_first, const Block& block,
                                           const MmaShapes& s, int quad, float (&running_max)[2],
                                           float (&running_sum)[2], float (&acc)[D / 8][4]) {
  const float score_scale = s.softcap > 0.0f ? s.scale : s.scale * kLog2e;
  // Each row's visible keys as tile columns [begin, end) (32-bit compares); a tile both rows see
  // whole (every tile but the diagonal, the window's edge and the sequence's end) skips the mask.
  int visible_begin[2], visible_end[2];
  bool whole = true;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t begin = block.row_begin[r] - tile_first, end = block.row_end[r] - tile_first;
    whole = whole && begin <= 0 && end >= kN;
    visible_begin[r] = static_cast<int>(begin < 0 ? 0 : begin > kN ? kN : begin);
    visible_end[r] = static_cast<int>(end < 0 ? 0 : end > kN ? kN : end);
  }
  auto scale_and_mask = [&]<bool kMasked>() {
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2, column = nt * 8 + quad * 2 + (e % 2);
        float x = scores[nt][e] * score_scale;
        if (s.softcap > 0.0f) x = s.softcap * tanhf(x / s.softcap) * kLog2e;
        scores[nt][e] = !kMasked || (column >= visible_begin[r] && column < visible_end[r]) ? x : -INFINITY;
      }
  };
  if (whole)
    scale_and_mask.template operator()<false>();
  else
    scale_and_mask.template operator()<true>();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = running_max[r];
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) tile_max = fmaxf(tile_max, fmaxf(scores[nt][2 * r], scores[nt][2 * r + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float base = tile_max == -INFINITY ? 0.0f : tile_max;  // a row with nothing visible yet
    const float correction = exp2f(running_max[r] - base);
    running_max[r] = tile_max;
    float sum = running_sum[r] * correction;
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        scores[nt][2 * r + c] = exp2f(scores[nt][2 * r + c] - base);
        sum += scores[nt][2 * r + c];
      }
    running_sum[r] = sum;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) acc[dn][2 * r] *= correction, acc[dn][2 * r + 1] *= correction;
  }
}

// The forwards' end: each row's sum over its group's lanes, lse = (max + log2 sum) ln 2 (-inf for a
// row that sees no key), and the rows of o = acc / sum as bf16.
template <int D, class Block>
__device__ inline void finish_forward_rows(const float (&acc)[D / 8][4], const float (&running_max)[2],
                                           const float (&running_sum)[2], const Block& block, const MmaShapes& s,
                                           int quad, __nv_bfloat16* o, float* lse) {
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

// The backwards' shared pieces (flash_attention_cuda_mma_backward.cu, the wgmma backward).

// The score of one (query, key) pair from its raw dot product: scaled, soft-capped (derivative of
// the cap in *derivative), as the CUDA-core kernels compute it.
__device__ inline float score_of(float dot, const MmaShapes& s, float* derivative) {
  return cuda::soft_cap(dot * s.scale, s.softcap, derivative);
}

// Whether query i sees key j.
__device__ inline bool sees(const MmaShapes& s, int64_t i, int64_t j) {
  int64_t begin, end;
  visible_keys(s.causal, s.window, i, s.seq_q, s.seq_k, &begin, &end);
  return j >= begin && j < end;
}

// The dq kernels' per-row statistics of this lane's two query rows: D = rowsum(dO * O) (summed
// over the group's lanes, each lane's share its fragments' columns in order; written to `delta`
// for the dk/dv kernel) and lse in log2 units (0 past seq_q).
template <int D, class Block>
__device__ inline void query_row_statistics(const Block& block, const MmaShapes& s, const __nv_bfloat16* o,
                                            const __nv_bfloat16* d_o, const float* lse, int quad, float* delta,
                                            float (&row_delta)[2], float (&row_lse)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = block.rows[r];
    float part = 0.0f;
    if (row < s.seq_q) {
      const __nv_bfloat16* do_row = d_o + block.q_offset + row * block.q_stride;
      const __nv_bfloat16* o_row = o + block.q_offset + row * block.q_stride;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        const float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(do_row + dn * 8 + quad * 2));
        const float2 y = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(o_row + dn * 8 + quad * 2));
        part += g.x * y.x + g.y * y.y;
      }
    }
    part += __shfl_xor_sync(0xffffffffu, part, 1);
    part += __shfl_xor_sync(0xffffffffu, part, 2);
    row_delta[r] = part;
    row_lse[r] = 0.0f;
    if (row < s.seq_q) {
      const int64_t stat = (block.b * s.n_heads + block.h) * s.seq_q + row;
      row_lse[r] = lse[stat] * kLog2e;
      if (quad == 0) delta[stat] = part;
    }
  }
}

// The dq kernels' elementwise step on a key tile (16 query rows x kN keys from tile_first, C
// fragments): grad holds the raw Q K^T and becomes dS = P (dP - D) cap' scale, P = exp(S - lse).
template <int kN, class Block>
__device__ inline void score_gradients_by_query(float (&grad)[kN / 8][4], const float (&dp)[kN / 8][4],
                                                int64_t tile_first, const Block& block, const MmaShapes& s, int quad,
                                                const float (&row_lse)[2], const float (&row_delta)[2]) {
#pragma unroll
  for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e / 2;
      const int64_t key = tile_first + nt * 8 + quad * 2 + (e % 2);
      float derivative;
      const float score = score_of(grad[nt][e], s, &derivative);
      const float p = block.sees(r, key) ? exp2f(score * kLog2e - row_lse[r]) : 0.0f;
      grad[nt][e] = p * (dp[nt][e] - row_delta[r]) * derivative * s.scale;
    }
}

// The dk/dv kernels' elementwise step on a query tile (16 key rows `keys` x kN queries from
// tile_first, C fragments; the tile's lse (log2 units) and D per query in shared memory): p holds
// the raw K Q^T and becomes P^T, grad holds dP^T = V dO^T and becomes dS^T.
template <int kN>
__device__ inline void score_gradients_by_key(float (&p)[kN / 8][4], float (&grad)[kN / 8][4], int64_t tile_first,
                                              int64_t query_end, const int64_t (&keys)[2], const MmaShapes& s, int quad,
                                              const float* lse_tile, const float* delta_tile) {
#pragma unroll
  for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int in_tile = nt * 8 + quad * 2 + (e % 2);
      const int64_t i = tile_first + in_tile, j = keys[e / 2];
      float derivative;
      const float score = score_of(p[nt][e], s, &derivative);
      const bool visible = i < query_end && sees(s, i, j);  // (visible keys end by seq_k)
      p[nt][e] = visible ? exp2f(score * kLog2e - lse_tile[in_tile]) : 0.0f;
      grad[nt][e] = p[nt][e] * (grad[nt][e] - delta_tile[in_tile]) * derivative * s.scale;
    }
}

}  // namespace lathe::mma
