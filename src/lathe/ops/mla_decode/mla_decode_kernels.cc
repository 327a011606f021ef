// mla_decode CPU kernel, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// All seq_q x n_heads query rows of a batch attend over the same cache rows, so they are flattened
// into one (rows, width) matrix (q's layout already is) and tiled like a GEMM: a task owns a block of
// query rows and one part of the key range, keeps an online softmax (running max m, sum l) per row
// and accumulates p @ c_kv into a rows x kv_rank accumulator, reading c_kv straight from the cache
// rows when they are f32 and kv_rank is a whole number of vectors. Two orientations of the score
// tile:
//   attend_part           (many rows, prefill): the cache block is packed transposed (width x
//                         block_k) once and shared by up to block_q rows; S = Q C^T.
//   attend_part_key_rows  (up to kMaxVectors vectors of rows, decode): S^T = C Q^T with the cache
//                         rows read in place and Q^T packed once per task; softmax across columns.
// Parts of the key range are merged in part order afterwards (rescaled by exp(m_part - m)), so the
// result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/flash_attention/attention_tiles.h"
#include "lathe/ops/mla_decode/mla_decode.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using namespace attention_tiles;

struct Geometry {
  int64_t batch, seq_q, seq_k, n_heads, width, kv_rank, rows;
  int64_t block_q, block_k, padded_block_k, padded_width, padded_rank;
  int64_t row_blocks, key_blocks, key_splits;
  int64_t cache_batch_stride;
  float scale;
  bool causal;

  Geometry(const MlaDecodeArgs& args, const MlaDecodeCpuConfig& config) {
    batch = args.q.dim(0), seq_q = args.q.dim(1), n_heads = args.q.dim(2), width = args.q.dim(3);
    seq_k = args.cache.dim(1), kv_rank = args.o.dim(3), rows = seq_q * n_heads;
    block_q = std::max<int64_t>(1, config.block_q);
    block_k = std::max<int64_t>(1, config.block_k);
    padded_block_k = round_up(block_k, W);
    padded_width = round_up(width, W);
    padded_rank = round_up(kv_rank, W);
    row_blocks = (rows + block_q - 1) / block_q;
    key_blocks = (seq_k + block_k - 1) / block_k;
    key_splits = std::clamp<int64_t>(config.key_splits, 1, std::max<int64_t>(1, key_blocks));
    cache_batch_stride = args.cache.stride(0);
    scale = args.options.scale;
    causal = args.options.causal;
  }
  // Keys visible to flattened query row r (query r / n_heads): [0, end).
  int64_t visible_end(int64_t r) const {
    return causal ? std::clamp<int64_t>(r / n_heads + seq_k - seq_q + 1, 0, seq_k) : seq_k;
  }
};

// The state of one (batch, query-row block, key part) task: accumulator (block_q x padded_rank),
// running max and sum (block_q each).
struct Partial {
  float* acc;
  float* row_max;
  float* row_sum;
};

template <class Element>
void attend_part(const Geometry& g, const Element* q, const Element* cache, int64_t b, int64_t r0, int64_t rows,
                 int64_t kb_begin, int64_t kb_end, float* q_tile, float* kt, float* v_tile, float* s,
                 const Partial& part) {
  const int64_t bkp = g.padded_block_k, wp = g.padded_width, rp = g.padded_rank;
  pack_rows(q + (b * g.rows + r0) * g.width, g.width, rows, g.width, wp, g.scale, q_tile);
  std::memset(part.acc, 0, sizeof(float) * rows * rp);
  for (int64_t r = 0; r < rows; ++r) part.row_max[r] = -INFINITY, part.row_sum[r] = 0.0f;
  // Causal: the last row of the block sees the most keys.
  const int64_t last_end = g.visible_end(r0 + rows - 1);
  kb_end = std::min(kb_end, (last_end + g.block_k - 1) / g.block_k);
  const Element* cache_batch = cache + b * g.cache_batch_stride;
  for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
    const int64_t j0 = kb * g.block_k, count = std::min(g.block_k, g.seq_k - j0);
    const Element* block = cache_batch + j0 * g.width;
    pack_transposed(block, g.width, count, g.width, bkp, kt);
    gemm(rows, bkp / W, g.width, q_tile, wp, 1, kt, bkp, s, bkp, false);
    for (int64_t r = 0; r < rows; ++r) {
      float* s_row = s + r * bkp;
      const int64_t c_end = std::clamp<int64_t>(g.visible_end(r0 + r) - j0, 0, count);
      if (c_end <= 0) {
        std::memset(s_row, 0, sizeof(float) * bkp);
        continue;
      }
      for (int64_t c = c_end; c < bkp; ++c) s_row[c] = kMaskedScore;
      VecF tile_max = VecF::broadcast(kMaskedScore);
      for (int64_t c = 0; c < bkp; c += W) tile_max = simd::max(tile_max, VecF::load(s_row + c));
      const float new_max = std::max(part.row_max[r], tile_max.reduce_max());
      const float alpha = std::exp(part.row_max[r] - new_max);
      const VecF shift = VecF::broadcast(new_max);
      VecF sum = VecF::zero();
      for (int64_t c = 0; c < bkp; c += W) {
        VecF p = simd::exp(VecF::load(s_row + c) - shift);
        p.store(s_row + c);
        sum += p;
      }
      part.row_sum[r] = part.row_sum[r] * alpha + sum.reduce_add();
      part.row_max[r] = new_max;
      if (alpha != 1.0f) {
        const VecF factor = VecF::broadcast(alpha);
        float* acc_row = part.acc + r * rp;
        for (int64_t d = 0; d < rp; d += W) (VecF::load(acc_row + d) * factor).store(acc_row + d);
      }
    }
    if constexpr (std::is_same_v<Element, float>) {
      if (g.kv_rank % W == 0) {  // c_kv read in place from f32 cache rows: no copy
        gemm(rows, rp / W, count, s, bkp, 1, block, g.width, part.acc, rp, true);
        continue;
      }
    }
    pack_rows(block, g.width, count, g.kv_rank, rp, 1.0f, v_tile);
    gemm(rows, rp / W, count, s, bkp, 1, v_tile, rp, part.acc, rp, true);
  }
}

// Few query rows (decode: seq_q x n_heads up to kMaxVectors vectors): the transposed score tile
// S^T = C Q^T (block_k x rows) takes the cache rows as the broadcast operand in place, so no cache
// block is transposed (that copy costs as much as the product when only ~16 rows share it), and
// Q^T (width x rows) is packed once per task. The online softmax then runs across the query
// columns, one vector at a time; p @ c_kv reads P^T with strides (1, rows_padded).
template <class Element>
void attend_part_key_rows(const Geometry& g, const Element* q, const Element* cache, int64_t b, int64_t r0,
                          int64_t rows, int64_t kb_begin, int64_t kb_end, float* qt, float* k_rows, float* v_tile,
                          float* st, float* column_state, const Partial& part) {
  const int64_t rp = g.padded_rank, mp = round_up(rows, W);
  float* column_max = column_state;
  float* column_sum = column_state + mp;
  float* alpha = column_state + 2 * mp;
  pack_transposed(q + (b * g.rows + r0) * g.width, g.width, rows, g.width, mp, qt);
  const VecF scale = VecF::broadcast(g.scale);
  for (int64_t i = 0; i < g.width * mp; i += W) (VecF::load(qt + i) * scale).store(qt + i);
  std::memset(part.acc, 0, sizeof(float) * rows * rp);
  // kMaskedScore, not -inf: simd::exp(-inf) is not defined to be 0.
  for (int64_t r = 0; r < mp; ++r) column_max[r] = kMaskedScore, column_sum[r] = 0.0f;
  const int64_t last_end = g.visible_end(r0 + rows - 1);
  kb_end = std::min(kb_end, (last_end + g.block_k - 1) / g.block_k);
  const Element* cache_batch = cache + b * g.cache_batch_stride;
  for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
    const int64_t j0 = kb * g.block_k, count = std::min(g.block_k, g.seq_k - j0);
    const Element* block = cache_batch + j0 * g.width;
    const float* rows_f32;
    if constexpr (std::is_same_v<Element, float>) {
      rows_f32 = block;
    } else {
      pack_rows(block, g.width, count, g.width, g.width, 1.0f, k_rows);
      rows_f32 = k_rows;
    }
    gemm(count, mp / W, g.width, rows_f32, g.width, 1, qt, mp, st, mp, false);
    // Causal: keys at or after a query's visible end are masked (bottom-right alignment makes the
    // visible set a prefix, so only the last blocks of a row have any): out of the max, and their
    // p zeroed after the exponential. Without the zeroing, a query that has seen no key yet would
    // get p = exp(kMaskedScore - kMaskedScore) = 1; the merge weighs a part whose max stayed at
    // kMaskedScore by 0, but a query that sees no key at all must end with a sum of 0.
    auto mask = [&](float value) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = std::max<int64_t>(0, g.visible_end(r0 + r) - j0); c < count; ++c) st[c * mp + r] = value;
    };
    mask(kMaskedScore);
    for (int64_t v = 0; v < mp; v += W) {
      VecF tile_max = VecF::broadcast(kMaskedScore);
      for (int64_t c = 0; c < count; ++c) tile_max = simd::max(tile_max, VecF::load(st + c * mp + v));
      const VecF new_max = simd::max(VecF::load(column_max + v), tile_max);
      for (int64_t c = 0; c < count; ++c) simd::exp(VecF::load(st + c * mp + v) - new_max).store(st + c * mp + v);
      new_max.store(alpha + v);  // the new max, until the sums below
    }
    mask(0.0f);
    for (int64_t v = 0; v < mp; v += W) {
      VecF sum = VecF::zero();
      for (int64_t c = 0; c < count; ++c) sum += VecF::load(st + c * mp + v);
      const VecF old_max = VecF::load(column_max + v), new_max = VecF::load(alpha + v);
      const VecF factor = simd::exp(old_max - new_max);
      factor.store(alpha + v);
      simd::fma(VecF::load(column_sum + v), factor, sum).store(column_sum + v);
      new_max.store(column_max + v);
    }
    for (int64_t r = 0; r < rows; ++r)
      if (alpha[r] != 1.0f) {
        const VecF factor = VecF::broadcast(alpha[r]);
        float* acc_row = part.acc + r * rp;
        for (int64_t d = 0; d < rp; d += W) (VecF::load(acc_row + d) * factor).store(acc_row + d);
      }
    if (g.kv_rank % W == 0) {  // c_kv read in place from the f32 rows: no copy
      gemm(rows, rp / W, count, st, 1, mp, rows_f32, g.width, part.acc, rp, true);
    } else {
      pack_rows(rows_f32, g.width, count, g.kv_rank, rp, 1.0f, v_tile);
      gemm(rows, rp / W, count, st, 1, mp, v_tile, rp, part.acc, rp, true);
    }
  }
  for (int64_t r = 0; r < rows; ++r) part.row_max[r] = column_max[r], part.row_sum[r] = column_sum[r];
}

// Writes o and lse of `rows` query rows from the parts' states, merged in part order.
template <class Element>
void finish_rows(const Geometry& g, const Partial* parts, int64_t part_count, int64_t b, int64_t r0, int64_t rows,
                 Element* o, float* lse) {
  const int64_t rp = g.padded_rank;
  for (int64_t r = 0; r < rows; ++r) {
    float max_all = -INFINITY;
    for (int64_t p = 0; p < part_count; ++p)
      if (parts[p].row_sum[r] > 0.0f) max_all = std::max(max_all, parts[p].row_max[r]);
    float sum = 0.0f;
    float weights[64];  // per part: exp(m_part - m); key_splits is capped at 64 by the caller
    for (int64_t p = 0; p < part_count; ++p) {
      weights[p] = parts[p].row_sum[r] > 0.0f ? std::exp(parts[p].row_max[r] - max_all) : 0.0f;
      sum += parts[p].row_sum[r] * weights[p];
    }
    const bool empty = sum == 0.0f;
    const int64_t flat = r0 + r, i = flat / g.n_heads, h = flat % g.n_heads;
    Element* o_row = o + (b * g.rows + flat) * g.kv_rank;
    const float inverse = empty ? 0.0f : 1.0f / sum;
    for (int64_t d = 0; d < g.kv_rank; d += W) {
      VecF value = VecF::zero();
      for (int64_t p = 0; p < part_count; ++p)
        if (weights[p] != 0.0f)
          value = simd::fma(VecF::load(parts[p].acc + r * rp + d), VecF::broadcast(weights[p] * inverse), value);
      store_lanes(value, o_row + d, g.kv_rank - d);
    }
    lse[(b * g.n_heads + h) * g.seq_q + i] = empty ? -INFINITY : max_all + std::log(sum);
  }
}

template <class Element>
void forward(const MlaDecodeArgs& args, const MlaDecodeCpuConfig& config) {
  Geometry g(args, config);
  g.key_splits = std::min<int64_t>(g.key_splits, 64);
  const Element* q = static_cast<const Element*>(args.q.data);
  const Element* cache = static_cast<const Element*>(args.cache.data);
  Element* o = static_cast<Element*>(args.o.data);
  float* lse = args.lse.ptr<float>();
  if (g.rows == 0 || g.batch == 0) return;
  const int64_t bkp = g.padded_block_k, rp = g.padded_rank;
  const int64_t splits = g.key_splits;
  // With one part, tasks finish their rows themselves; with several, every part keeps its state
  // and a second pass merges them.
  const int64_t part_floats = g.block_q * (rp + 2);
  AlignedBuffer parts_buffer;
  float* parts_all = splits > 1 ? scratch(parts_buffer, g.batch * g.row_blocks * splits * part_floats) : nullptr;
  auto part_at = [&](float* base) { return Partial{base, base + g.block_q * rp, base + g.block_q * (rp + 1)}; };

  const int64_t tasks = g.batch * g.row_blocks * splits;
  parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
    AlignedBuffer buffers[6];
    // Score tiles in either orientation; key_rows uses q_tile for Q^T and kt for f32 cache rows.
    const int64_t mp = round_up(g.block_q, W);
    float* q_tile = scratch(buffers[0], std::max(g.block_q * g.padded_width, g.width * mp));
    float* kt = scratch(buffers[1], g.width * std::max(bkp, g.block_k));
    float* v_tile = scratch(buffers[2], g.block_k * rp);
    float* s = scratch(buffers[3], std::max(g.block_q * bkp, g.block_k * mp));
    float* own = splits > 1 ? nullptr : scratch(buffers[4], part_floats);
    float* column_state = scratch(buffers[5], 4 * mp);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t split = task % splits, block_task = task / splits;
      const int64_t b = block_task / g.row_blocks, rb = zigzag(block_task % g.row_blocks, g.row_blocks);
      const int64_t r0 = rb * g.block_q, rows = std::min(g.block_q, g.rows - r0);
      const int64_t kb_begin = g.key_blocks * split / splits, kb_end = g.key_blocks * (split + 1) / splits;
      float* state = splits > 1 ? parts_all + ((b * g.row_blocks + rb) * splits + split) * part_floats : own;
      const Partial part = part_at(state);
      if (round_up(rows, W) <= kMaxVectors * W)
        attend_part_key_rows(g, q, cache, b, r0, rows, kb_begin, kb_end, q_tile, kt, v_tile, s, column_state, part);
      else
        attend_part(g, q, cache, b, r0, rows, kb_begin, kb_end, q_tile, kt, v_tile, s, part);
      if (splits == 1) finish_rows(g, &part, 1, b, r0, rows, o, lse);
    }
  });
  if (splits == 1) return;
  parallel_for(g.batch * g.row_blocks, 1, [&](int64_t begin, int64_t end) {
    Partial parts[64];
    for (int64_t block_task = begin; block_task < end; ++block_task) {
      const int64_t b = block_task / g.row_blocks, rb = block_task % g.row_blocks;
      const int64_t r0 = rb * g.block_q, rows = std::min(g.block_q, g.rows - r0);
      for (int64_t p = 0; p < splits; ++p) parts[p] = part_at(parts_all + (block_task * splits + p) * part_floats);
      finish_rows(g, parts, splits, b, r0, rows, o, lse);
    }
  });
}

}  // namespace

void mla_decode_kernel(const MlaDecodeArgs& args, const MlaDecodeCpuConfig& config) {
  if (args.q.dtype == DType::bf16)
    forward<uint16_t>(args, config);
  else
    forward<float>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
