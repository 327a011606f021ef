// Flash attention on AMX tiles (bf16 q, k, v, o), written once against core/amx_tiles.h and
// compiled three times (lathe_add_amx_kernels): lathe::avx512:: runs tdpbf16ps where core/amx.h
// found AMX usable; lathe::scalar:: runs the same code on the scalar emulation of the tile
// instructions, so the op-contract tests check it on every machine; lathe::avx512_emulated_tiles::
// is the AVX-512 build on the emulation, compared with the scalar one by amx_avx512_build_test.cc.
//
// The same algorithm as the vector kernels (flash_attention_kernels.cc; the softmax and gradient
// rows are attention_blocks.h's, in f32 vector code), with every product on tiles:
//   forward   S = Q K^T, O += P V                      (online softmax between them)
//   backward  S = Q K^T, dP = dO V^T, dV^T += dO^T P, dK^T += Q^T dS, dQ += dS K
// A product is tile_product: 32 x 32 blocks of C (four 16 x 16 f32 tiles, C0-C3) from A tiles 4-5
// (16 rows x 32 bf16 each) and B tiles 6-7 (VNNI: 16 pair rows x 16 columns x 2), in depth steps
// of 32. So block_q and block_k are rounded up to multiples of 32 and head_dim / v_head_dim are
// zero padded to them; padded keys are masked, padded query rows are zero.
//
// Q, K, V and dO enter the products as the bf16 they are (exact products, f32 sums). P and dS are
// f32 results of the softmax, rounded to bf16 once as they enter their products (as FlashAttention
// and PyTorch's bf16 SDPA do; the op's float baseline of bf16 inputs rounds them likewise, so the
// tolerance rule holds, checked on the emulation by the contract tests). Until 2026-12-06 they
// entered as two bf16 terms (hi + lo, ~16 bits), which doubled the tile work of the four products
// with P or dS. Scores are scaled in f32 (Q is not pre-scaled, which would round it again); dK and
// dQ take the scale when stored.
//
// Layouts (bf16 as uint16_t bits):
//   A operand: rows x depth, row-major, depth padded to 32 (pack_rows_bf16, or Q and dO where they
//     lie; Q^T and dO^T by transpose_rows_padded; P by attention_blocks::online_softmax_row, dS by
//     gradient_row_pair);
//   B operand: VNNI panels of 32 columns, element (depth 2q + h, column j) at panel[q][j][h], a
//     panel depth x 32 long; pack_columns_vnni when the columns are the source's rows (K for Q K^T,
//     V for dO V^T), pack_rows_vnni when the depth runs over them (V for P V, K for dS K),
//     gradient_row_pair for P and dS (dV^T and dK^T: a pair of query rows interleaved).
// Threads: the forward splits (batch, head, query block) tasks; the backward splits (batch,
// kv head, key block) tasks into one range per thread with dQ in partials per range
// (attention_blocks::DqPartials, each over the pairs its range touches) summed in range order, as
// the vector kernels do: bitwise reproducible for a fixed thread count. Each thread configures the
// tiles before its share and releases them after.
#include "lathe/core/simd.h"
// (simd.h first: it names the namespace)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/amx_tiles.h"
#include "lathe/core/parallel.h"
#include "lathe/ops/flash_attention/attention_blocks.h"
#include "lathe/ops/flash_attention/attention_tiles.h"
#include "lathe/ops/flash_attention/flash_attention.h"
#include "lathe/ops/matmul/matmul_packing.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using amx_tiles::Tiles;
using attention_blocks::Geometry;
using attention_tiles::Arena;
using attention_tiles::kNativeBf16Build;
using attention_tiles::round_up;
using attention_tiles::store_lanes;
using attention_tiles::to_float;
using attention_tiles::zigzag;
using simd::VecF;
constexpr int W = VecF::width;
constexpr int64_t kBlock = 32;  // rows and columns of a 2 x 2 block of tiles; bf16 depth steps per tile row

// A scratch buffer of `count` bf16 values (contents undefined).
uint16_t* bf16_scratch(AlignedBuffer& buffer, int64_t count) {
  buffer = AlignedBuffer(sizeof(uint16_t) * static_cast<size_t>(std::max<int64_t>(count, 32)));
  return buffer.as<uint16_t>();
}

// `count` bf16 values from an arena (64-byte aligned, contents undefined).
uint16_t* take_bf16(Arena& arena, int64_t count) { return reinterpret_cast<uint16_t*>(arena.take((count + 1) / 2)); }

// c (rows x cols f32, leading dimension ldc floats) = a . b, or += where accumulate, with
//   a: rows x depth bf16, row-major, leading dimension lda elements;
//   b: depth x cols in VNNI panels of 32 columns, panel p at b + p * panel_stride elements;
//   rows, cols and depth multiples of 32.
void tile_product(int64_t rows, int64_t cols, int64_t depth, const uint16_t* a, int64_t lda, const uint16_t* b,
                  int64_t panel_stride, float* c, int64_t ldc, bool accumulate) {
  const int64_t a_bytes = 2 * lda, c_bytes = 4 * ldc;
  for (int64_t j = 0; j < cols; j += kBlock) {
    const uint16_t* panel = b + (j / kBlock) * panel_stride;
    for (int64_t i = 0; i < rows; i += kBlock) {
      float* block = c + i * ldc + j;
      if (accumulate) {
        Tiles::load<0>(block, c_bytes), Tiles::load<1>(block + 16, c_bytes);
        Tiles::load<2>(block + 16 * ldc, c_bytes), Tiles::load<3>(block + 16 * ldc + 16, c_bytes);
      } else {
        Tiles::zero<0>(), Tiles::zero<1>(), Tiles::zero<2>(), Tiles::zero<3>();
      }
      for (int64_t p = 0; p < depth; p += kBlock) {
        Tiles::load<6>(panel + p * kBlock, 4 * kBlock);       // pair rows p/2 .. p/2 + 15, columns 0-15
        Tiles::load<7>(panel + p * kBlock + 32, 4 * kBlock);  // columns 16-31
        Tiles::load<4>(a + i * lda + p, a_bytes);
        Tiles::load<5>(a + (i + 16) * lda + p, a_bytes);
        Tiles::dpbf16ps<0, 4, 6>();
        Tiles::dpbf16ps<1, 4, 7>();
        Tiles::dpbf16ps<2, 5, 6>();
        Tiles::dpbf16ps<3, 5, 7>();
      }
      Tiles::store<0>(block, c_bytes), Tiles::store<1>(block + 16, c_bytes);
      Tiles::store<2>(block + 16 * ldc, c_bytes), Tiles::store<3>(block + 16 * ldc + 16, c_bytes);
    }
  }
}

// dest (padded_rows x padded_dim, row-major) = rows x dim of src (leading dimension stride), zero
// padded.
void pack_rows_bf16(const uint16_t* src, int64_t stride, int64_t rows, int64_t dim, int64_t padded_rows,
                    int64_t padded_dim, uint16_t* dest) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dest + r * padded_dim, src + r * stride, sizeof(uint16_t) * dim);
    std::memset(dest + r * padded_dim + dim, 0, sizeof(uint16_t) * (padded_dim - dim));
  }
  std::memset(dest + rows * padded_dim, 0, sizeof(uint16_t) * (padded_rows - rows) * padded_dim);
}

// VNNI panels of x's rows (gemm::pack_bf16_pairs' rows: 32 of them a panel) over `depth`: each
// panel padded_depth x 32 long, its depth padding zeroed, panels past `rows` (to padded_rows)
// zero. pack_bf16_pairs moves whole blocks through registers (8 x 8 blocks of 32-bit pairs, or 16
// columns of two storage rows merged per vector); the element-by-element copies they replaced were
// a quarter of the forward's vector work at T 2048, head_dim 128 (Zen 4).
void pack_pair_panels(const gemm::Operand& x, int64_t rows, int64_t depth, int64_t padded_rows, int64_t padded_depth,
                      uint16_t* dest) {
  const int64_t pair_rows = (depth + 1) / 2 * 2;  // what pack_bf16_pairs writes of a panel's depth
  for (int64_t r0 = 0; r0 < padded_rows; r0 += kBlock) {
    uint16_t* panel = dest + (r0 / kBlock) * padded_depth * kBlock;
    if (r0 >= rows) {
      std::memset(panel, 0, sizeof(uint16_t) * padded_depth * kBlock);
      continue;
    }
    gemm::pack_bf16_pairs(x, 0, r0, std::min(kBlock, rows - r0), 0, depth, kBlock, panel);
    std::memset(panel + pair_rows * kBlock, 0, sizeof(uint16_t) * (padded_depth - pair_rows) * kBlock);
  }
}

// B operand whose columns are src's rows: (depth d, column j) = src[j][d] for j < count, d < dim,
// zero to padded_count columns and padded_dim depth; panels padded_dim x 32 long.
void pack_columns_vnni(const uint16_t* src, int64_t stride, int64_t count, int64_t dim, int64_t padded_count,
                       int64_t padded_dim, uint16_t* dest) {
  gemm::Operand rows;
  rows.data = src, rows.bf16 = true, rows.row_stride = stride;
  pack_pair_panels(rows, count, dim, padded_count, padded_dim, dest);
}

// B operand whose depth runs over src's rows: (depth j, column d) = src[j][d] for j < count,
// d < dim, zero to padded_count depth and padded_dim columns; panels padded_count x 32 long, each
// pair of rows one row of 32-bit units (row j in the low half, row j + 1 in the high).
void pack_rows_vnni(const uint16_t* src, int64_t stride, int64_t count, int64_t dim, int64_t padded_count,
                    int64_t padded_dim, uint16_t* dest) {
  gemm::Operand columns;  // logical (d, j) over storage rows j
  columns.data = src, columns.bf16 = true, columns.row_stride = stride, columns.transposed = true;
  pack_pair_panels(columns, dim, count, padded_dim, padded_count, dest);
}

void forward(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config) {
  const Geometry g(args.q, args.k, args.v, args.options, round_up(std::max<int64_t>(1, config.block_q), kBlock),
                   round_up(std::max<int64_t>(1, config.block_k), kBlock), kBlock);
  const attention_blocks::ForwardOperands<uint16_t> operands(args);
  const auto [q, k, v, o, lse] = operands;
  const int64_t q_stride = g.n_heads * g.head_dim, kv_stride = g.n_kv_heads * g.head_dim;
  const int64_t v_stride = g.n_kv_heads * g.v_head_dim;
  const int64_t bq = g.block_q, bk = g.block_k, dp = g.padded_dim, vp = g.padded_v_dim;
  const int64_t k_tile = dp * bk, v_tile = bk * vp;

  // K as the B of Q K^T and V as the B of P V, for every (batch, kv head, key block), packed once.
  const int64_t tiles = g.batch * g.n_kv_heads * g.key_blocks;
  Arena call((tiles * (k_tile + v_tile) + 1) / 2 + 32, Arena::kCall, /*zeroed=*/false);  // packed in full
  uint16_t* k_all = take_bf16(call, tiles * k_tile);
  uint16_t* v_all = take_bf16(call, tiles * v_tile);
  parallel_for(tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t kb = t % g.key_blocks, bg = t / g.key_blocks;
      const int64_t b = bg / g.n_kv_heads, kv_head = bg % g.n_kv_heads;
      const int64_t j0 = kb * bk, count = std::min(bk, g.seq_k - j0);
      const int64_t row = (b * g.seq_k + j0) * g.n_kv_heads + kv_head;
      pack_columns_vnni(k + row * g.head_dim, kv_stride, count, g.head_dim, bk, dp, k_all + t * k_tile);
      pack_rows_vnni(v + row * g.v_head_dim, v_stride, count, g.v_head_dim, bk, vp, v_all + t * v_tile);
    }
  });

  const int64_t query_blocks = (g.seq_q + bq - 1) / bq;
  parallel_for(g.batch * g.n_heads * query_blocks, 1, [&](int64_t begin, int64_t end) {
    Tiles::configure(16, 64);
    AlignedBuffer buffers[5];
    uint16_t* q_rows = bf16_scratch(buffers[0], bq * dp);
    float* s = attention_tiles::scratch(buffers[1], bq * bk);
    uint16_t* p = bf16_scratch(buffers[2], bq * bk);  // P rounded to bf16
    float* acc = attention_tiles::scratch(buffers[3], bq * vp);
    attention_blocks::RowStats stats(attention_tiles::scratch(buffers[4], attention_blocks::RowStats::floats(bq)), bq);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t qb = zigzag(task % query_blocks, query_blocks), bh = task / query_blocks;
      const int64_t b = bh / g.n_heads, h = bh % g.n_heads, kv_head = h / g.group;
      const int64_t i0 = qb * bq, rows = std::min(bq, g.seq_q - i0), padded_rows = round_up(rows, kBlock);
      pack_rows_bf16(q + ((b * g.seq_q + i0) * g.n_heads + h) * g.head_dim, q_stride, rows, g.head_dim, padded_rows, dp,
                     q_rows);
      std::memset(acc, 0, sizeof(float) * padded_rows * vp);
      stats.reset(rows);
      // Padding rows of P stay zero: they add nothing to the (unused) padding rows of acc.
      std::memset(p + rows * bk, 0, sizeof(uint16_t) * (padded_rows - rows) * bk);

      int64_t kb_begin, kb_end;
      g.key_block_range(i0, rows, &kb_begin, &kb_end);
      const int64_t head_tiles = (b * g.n_kv_heads + kv_head) * g.key_blocks;
      for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
        const int64_t j0 = kb * bk, count = std::min(bk, g.seq_k - j0);
        tile_product(padded_rows, bk, dp, q_rows, dp, k_all + (head_tiles + kb) * k_tile, dp * kBlock, s, bk, false);
        for (int64_t r = 0; r < rows; ++r) {
          int64_t c_begin, c_end;
          g.tile_keys(i0 + r, j0, count, &c_begin, &c_end);
          attention_blocks::online_softmax_row<true, true>(s + r * bk, bk, c_begin, c_end, g.scale, g.softcap,
                                                           stats.max + r, stats.row_sum(r), acc + r * vp, vp,
                                                           p + r * bk);
        }
        tile_product(padded_rows, vp, bk, p, bk, v_all + (head_tiles + kb) * v_tile, bk * kBlock, acc, vp, true);
      }
      attention_blocks::store_output_rows(g, acc, vp, stats, b, h, i0, rows, o, lse);
    }
    Tiles::release();
  });
}

// dest (padded_dim rows x padded_count columns, row-major bf16, rows `pitch` >= padded_count
// apart) = the transpose of count rows of dim values of src (row stride `stride`), zero padded:
// Q^T or dO^T, rows the head's dims and columns its queries, as the A operand of a product over
// queries.
void transpose_rows_padded(const uint16_t* src, int64_t stride, int64_t count, int64_t dim, int64_t padded_count,
                           int64_t padded_dim, int64_t pitch, uint16_t* dest) {
  gemm::transpose_bf16_rows(src, stride, dim, count, dest, pitch);
  for (int64_t d = 0; d < dim; ++d) std::memset(dest + d * pitch + count, 0, sizeof(uint16_t) * (padded_count - count));
  for (int64_t d = dim; d < padded_dim; ++d) std::memset(dest + d * pitch, 0, sizeof(uint16_t) * padded_count);
}

// The row pitch (bf16 elements) of a cached Q^T or dO^T of `padded_count` queries: one cache line
// more, so that its rows are not a multiple of 1 KB apart. At T 2048 they were 4 KB apart, and the
// tile loads of 16 rows, the 64-query blocks of a head's 128 dims, and the transpose's stores all
// fell into one or two L1 sets: with the tiles' loads and stores modelled as vector loads and
// stores (the tile-free harness of docs/perf.md), the backward took 24.2 -> 21.4 ms on Zen 4.
int64_t transposed_pitch(int64_t padded_count) { return padded_count + 32; }

// The backward's view of one query row of a block: the keys it sees, [c_begin, c_end) (none for
// a padding row), its lse and its delta = do . o.
struct GradientRow {
  int64_t c_begin = 0, c_end = 0;
  float lse = 0.0f, delta = 0.0f;
};

// even and odd (W values of two rows) rounded to bf16 and interleaved into `pairs` (2W values:
// even's lane i at 2i, odd's at 2i + 1: a panel row of P or dS as the B of a product over
// queries); where even_row and odd_row are given, each row's W values also go there as they are.
[[gnu::always_inline]] inline void store_rounded_row_pair(VecF even, VecF odd, uint16_t* pairs, uint16_t* even_row,
                                                          uint16_t* odd_row) {
#if LATHE_KERNEL_ISA == 2 && defined(__AVX512BF16__)
  const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd.v, even.v));  // even's 16, then odd's
  if (even_row) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(even_row), _mm512_castsi512_si256(both));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(odd_row), _mm512_extracti64x4_epi64(both, 1));
  }
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  _mm512_storeu_si512(pairs, _mm512_permutexvar_epi16(interleave, both));
#else
  alignas(64) uint16_t even_bits[W], odd_bits[W];
  even.store_bf16(even_bits), odd.store_bf16(odd_bits);
  for (int i = 0; i < W; ++i) pairs[2 * i] = even_bits[i], pairs[2 * i + 1] = odd_bits[i];
  if (even_row) {
    std::memcpy(even_row, even_bits, sizeof(even_bits));
    std::memcpy(odd_row, odd_bits, sizeof(odd_bits));
  }
#endif
}

// Query rows r and r + 1 of a block's scores s and dp = dO V^T (bk keys a row, f32 from their
// products) through attention_blocks::GradientLanes, kept only as the bf16 operands that use
// them: dS as rows (ds_rows, the A of dQ += dS K) and P and dS as the row pair interleaved
// (p_pairs and ds_pairs, the B of dV^T += dO^T P and dK^T += Q^T dS; padded_rows x 32 a panel of
// 32 keys). p = ds = 0 outside a row's keys. (Stored as f32 and rounded by three more passes, the
// pair cost twice the loads and stores.)
[[gnu::always_inline]] inline void gradient_row_pair(const float* s, const float* dp, int64_t bk, int64_t r,
                                                     int64_t padded_rows, const GradientRow (&rows)[2], float scale,
                                                     float softcap, uint16_t* ds_rows, uint16_t* p_pairs,
                                                     uint16_t* ds_pairs) {
  const attention_blocks::GradientLanes<true> lanes[2] = {{scale, softcap, rows[0].lse, rows[0].delta},
                                                          {scale, softcap, rows[1].lse, rows[1].delta}};
  for (int64_t c = 0; c < bk; c += W) {
    VecF p[2], ds[2];
    for (int i = 0; i < 2; ++i) {
      const GradientRow& row = rows[i];
      if (c >= row.c_end || c + W <= row.c_begin) {  // also a row without keys
        p[i] = ds[i] = VecF::zero();
        continue;
      }
      lanes[i](VecF::load(s + i * bk + c), VecF::load(dp + i * bk + c), &p[i], &ds[i]);
      if (c < row.c_begin || c + W > row.c_end) {
        const int lo = static_cast<int>(row.c_begin - c), hi = static_cast<int>(row.c_end - c);
        p[i] = simd::keep_lanes(p[i], lo, hi), ds[i] = simd::keep_lanes(ds[i], lo, hi);
      }
    }
    const int64_t pair_offset = (c / kBlock) * padded_rows * kBlock + r * kBlock + (c % kBlock) * 2;
    store_rounded_row_pair(p[0], p[1], p_pairs + pair_offset, nullptr, nullptr);
    store_rounded_row_pair(ds[0], ds[1], ds_pairs + pair_offset, ds_rows + r * bk + c, ds_rows + (r + 1) * bk + c);
  }
}

// out[c * stride + d] = bf16(scale * acc[d * ld + c]) for keys c < count and dims d < dim: dK^T or
// dV^T (padded dims x ld keys, both multiples of 32) into dK's or dV's rows, W x W blocks
// transposed in registers.
void store_transposed(const float* acc, int64_t ld, int64_t count, int64_t dim, float scale, uint16_t* out,
                      int64_t stride) {
  alignas(64) float block[W * W];
  const VecF factor = VecF::broadcast(scale);
  for (int64_t c0 = 0; c0 < count; c0 += W)
    for (int64_t d0 = 0; d0 < dim; d0 += W) {
      attention_tiles::transpose_block(acc + d0 * ld + c0, ld, block, W);  // block[j * W + i]: key c0 + j, dim d0 + i
      for (int64_t j = 0; j < W && c0 + j < count; ++j)
        store_lanes(VecF::load(block + j * W) * factor, out + (c0 + j) * stride + d0, dim - d0);
    }
}

constexpr int64_t kMaxTransposeCacheBytes = int64_t{32} << 20;  // per thread: Q^T and dO^T of a kv head's group

void backward(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig& config) {
  const Geometry g(args.q, args.k, args.v, args.options, round_up(std::max<int64_t>(1, config.block_q), kBlock),
                   round_up(std::max<int64_t>(1, config.block_k), kBlock), kBlock);
  const attention_blocks::BackwardOperands<uint16_t> operands(args);
  const auto [q, k, v, o, d_o, lse, dq, dk, dv] = operands;
  const int64_t q_stride = g.n_heads * g.head_dim, kv_stride = g.n_kv_heads * g.head_dim;
  const int64_t o_stride = g.n_heads * g.v_head_dim, v_stride = g.n_kv_heads * g.v_head_dim;
  const int64_t bq = g.block_q, bk = g.block_k, dp = g.padded_dim, vp = g.padded_v_dim;

  // dQ partials of the task ranges (DqPartials: zeroed by the range's thread, summed in range
  // order afterwards), rows (head, i) with bq rows of padding per head (a block's padded rows stay
  // inside its head); D = do . o per row.
  const int64_t rows_per_head = g.seq_q + bq;
  attention_blocks::DqPartials partials(g, num_threads(), rows_per_head, dp);
  const int64_t query_rows = g.batch * g.n_heads * g.seq_q;
  Arena call(partials.floats() + query_rows, Arena::kCall, /*zeroed=*/false);  // zeroed by range
  partials.bind(call.take(partials.floats()));
  float* delta = call.take(query_rows);
  attention_blocks::output_gradient_dots(g, d_o, o, delta);
  parallel_run([&](int thread, int thread_count) {
    Tiles::configure(16, 64);
    AlignedBuffer buffers[14];
    uint16_t* k_columns = bf16_scratch(buffers[0], dp * bk);  // K: the B of Q K^T
    uint16_t* v_columns = bf16_scratch(buffers[1], vp * bk);  // V: the B of dO V^T
    uint16_t* k_depth = bf16_scratch(buffers[2], bk * dp);    // K: the B of dS K
    uint16_t* q_rows = bf16_scratch(buffers[3], bq * dp);     // Q: the A of Q K^T
    uint16_t* do_rows = bf16_scratch(buffers[4], bq * vp);    // dO: the A of dO V^T
    uint16_t* q_t = bf16_scratch(buffers[5], dp * bq);        // Q^T: the A of dK^T += Q^T dS
    uint16_t* do_t = bf16_scratch(buffers[6], vp * bq);       // dO^T: the A of dV^T += dO^T P
    float* s = attention_tiles::scratch(buffers[7], bq * bk);
    float* ds = attention_tiles::scratch(buffers[8], bq * bk);
    uint16_t* p_pairs = bf16_scratch(buffers[9], bq * bk);  // P and dS as pairs of query rows, dS as rows
    uint16_t* ds_pairs = bf16_scratch(buffers[10], bq * bk);
    uint16_t* ds_rows = bf16_scratch(buffers[11], bq * bk);
    float* dk_acc = attention_tiles::scratch(buffers[12], dp * bk);  // dK^T and dV^T (dims x keys)
    float* dv_acc = attention_tiles::scratch(buffers[13], vp * bk);
    // dK and dV are accumulated transposed, dK^T += Q^T dS and dV^T += dO^T P, so P and dS enter
    // as pairs of query rows (an interleave of two rows, gradient_row_pair) where P^T and dS^T as A
    // operands took a transpose each per block (1-2 ms of the vector work at T 2048, 8 heads,
    // Zen 4); dK and dV are transposed once per key block at the end. Q^T and dO^T are transposed
    // for every head of the (batch, kv head) this thread is on and kept for its other key blocks
    // (up to kMaxTransposeCacheBytes per thread; partial blocks transpose their own).
    const int64_t padded_seq = round_up(g.seq_q, kBlock), seq_pitch = transposed_pitch(padded_seq);
    const int64_t q_head_cache = dp * seq_pitch, do_head_cache = vp * seq_pitch;
    const bool cache_transposes = 2 * g.group * (q_head_cache + do_head_cache) <= kMaxTransposeCacheBytes;
    AlignedBuffer cache_buffer;
    uint16_t* q_cache =
        cache_transposes ? bf16_scratch(cache_buffer, g.group * (q_head_cache + do_head_cache)) : nullptr;
    uint16_t* do_cache = cache_transposes ? q_cache + g.group * q_head_cache : nullptr;
    int64_t cached_bg = -1;
    partials.run_ranges(thread, thread_count, [&](int range, int64_t bg, int64_t kb) {
      const int64_t b = bg / g.n_kv_heads, kv_head = bg % g.n_kv_heads;
      const int64_t j0 = kb * bk, count = std::min(bk, g.seq_k - j0);
      const int64_t kv_row = (b * g.seq_k + j0) * g.n_kv_heads + kv_head;
      const int64_t kv_offset = kv_row * g.head_dim, v_offset = kv_row * g.v_head_dim;
      pack_columns_vnni(k + kv_offset, kv_stride, count, g.head_dim, bk, dp, k_columns);
      pack_columns_vnni(v + v_offset, v_stride, count, g.v_head_dim, bk, vp, v_columns);
      pack_rows_vnni(k + kv_offset, kv_stride, count, g.head_dim, bk, dp, k_depth);
      if (cache_transposes && bg != cached_bg) {
        for (int64_t h = kv_head * g.group; h < (kv_head + 1) * g.group; ++h) {
          const int64_t head_start = b * g.seq_q * g.n_heads + h, slot = h - kv_head * g.group;
          transpose_rows_padded(q + head_start * g.head_dim, q_stride, g.seq_q, g.head_dim, padded_seq, dp, seq_pitch,
                                q_cache + slot * q_head_cache);
          transpose_rows_padded(d_o + head_start * g.v_head_dim, o_stride, g.seq_q, g.v_head_dim, padded_seq, vp,
                                seq_pitch, do_cache + slot * do_head_cache);
        }
        cached_bg = bg;
      }
      bool first_block = true;  // its products start dK^T and dV^T (no zeroing pass)
      int64_t i_begin, i_end;
      g.query_range(j0, count, &i_begin, &i_end);
      for (int64_t h = kv_head * g.group; h < (kv_head + 1) * g.group; ++h) {
        const int64_t head_row = (b * g.n_heads + h) * g.seq_q;
        for (int64_t i0 = i_begin; i0 < i_end; i0 += bq) {
          const int64_t rows = std::min(bq, i_end - i0), padded_rows = round_up(rows, kBlock);
          const int64_t q_row = (b * g.seq_q + i0) * g.n_heads + h;
          const uint16_t* q_block = q + q_row * g.head_dim;
          const uint16_t* do_block = d_o + q_row * g.v_head_dim;
          // A whole block (no padding rows) whose widths need no padding is read where it lies as
          // the A of Q K^T and dO V^T, and its Q^T and dO^T columns come from the cache.
          const bool whole = rows == padded_rows;
          const bool a_in_place = whole && g.head_dim == dp && g.v_head_dim == vp;
          const bool cached = cache_transposes && whole;
          const uint16_t* q_a = a_in_place ? q_block : q_rows;
          const uint16_t* do_a = a_in_place ? do_block : do_rows;
          if (!a_in_place) {
            pack_rows_bf16(q_block, q_stride, rows, g.head_dim, padded_rows, dp, q_rows);
            pack_rows_bf16(do_block, o_stride, rows, g.v_head_dim, padded_rows, vp, do_rows);
          }
          const int64_t slot = h - kv_head * g.group, t_stride = cached ? seq_pitch : padded_rows;
          const uint16_t* q_ta = cached ? q_cache + slot * q_head_cache + i0 : q_t;
          const uint16_t* do_ta = cached ? do_cache + slot * do_head_cache + i0 : do_t;
          if (!cached) {
            transpose_rows_padded(q_block, q_stride, rows, g.head_dim, padded_rows, dp, padded_rows, q_t);
            transpose_rows_padded(do_block, o_stride, rows, g.v_head_dim, padded_rows, vp, padded_rows, do_t);
          }
          tile_product(padded_rows, bk, dp, q_a, a_in_place ? q_stride : dp, k_columns, dp * kBlock, s, bk, false);
          tile_product(padded_rows, bk, vp, do_a, a_in_place ? o_stride : vp, v_columns, vp * kBlock, ds, bk, false);
          for (int64_t r = 0; r < padded_rows; r += 2) {
            GradientRow pair[2];
            for (int i = 0; i < 2; ++i)
              if (r + i < rows) {
                g.tile_keys(i0 + r + i, j0, count, &pair[i].c_begin, &pair[i].c_end);
                pair[i].lse = lse[head_row + i0 + r + i], pair[i].delta = delta[head_row + i0 + r + i];
              }
            gradient_row_pair(s + r * bk, ds + r * bk, bk, r, padded_rows, pair, g.scale, g.softcap, ds_rows, p_pairs,
                              ds_pairs);
          }
          // dV^T += dO^T P, dK^T += Q^T dS (scaled when stored), dQ += dS K (scaled when summed).
          tile_product(vp, bk, padded_rows, do_ta, t_stride, p_pairs, padded_rows * kBlock, dv_acc, bk, !first_block);
          tile_product(dp, bk, padded_rows, q_ta, t_stride, ds_pairs, padded_rows * kBlock, dk_acc, bk, !first_block);
          first_block = false;
          tile_product(padded_rows, dp, bk, ds_rows, bk, k_depth, bk * kBlock,
                       partials.pair_rows(range, bg) + (slot * rows_per_head + i0) * dp, dp, true);
        }
      }
      // dK^T and dV^T (dims x keys) into dK's and dV's rows.
      if (first_block) {  // no query sees these keys
        std::memset(dk_acc, 0, sizeof(float) * dp * bk);
        std::memset(dv_acc, 0, sizeof(float) * vp * bk);
      }
      store_transposed(dk_acc, bk, count, g.head_dim, g.scale, dk + kv_offset, kv_stride);
      store_transposed(dv_acc, bk, count, g.v_head_dim, 1.0f, dv + v_offset, v_stride);
    });
    Tiles::release();
  });
  partials.sum(dq);
}

}  // namespace

// simd::exp_unclamped and attention_tiles::store_bf16_rounded over n values (a multiple of 16),
// for the tests: this build's bf16 rounding of P runs nowhere else off an AMX machine.
void flash_attention_amx_softmax_exp(const float* x, int64_t n, float* p, uint16_t* p_bf16) {
  for (int64_t i = 0; i < n; i += W) {
    const VecF value = simd::exp_unclamped(VecF::load(x + i));
    value.store(p + i);
    attention_tiles::store_bf16_rounded<kNativeBf16Build>(value, p_bf16 + i);
  }
}

void flash_attention_amx_forward_kernel(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config) {
  forward(args, config);
}

void flash_attention_amx_backward_kernel(const FlashAttentionBackwardArgs& args,
                                         const FlashAttentionCpuConfig& config) {
  backward(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
