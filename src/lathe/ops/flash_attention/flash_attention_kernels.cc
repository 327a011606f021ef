// Flash attention CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// Forward: K is packed once into transposed tiles (head_dim x block_k, keys along the vector) and V
// into rows padded to whole vectors (v_head_dim wide, which may differ from head_dim); each task
// (batch, head, query block) keeps a block_q x block_k score tile, an online softmax (running max m,
// sum l) and a block_q x v_head_dim accumulator. Products are
// register-blocked microkernels (6 rows x up to 4 vectors of accumulators).
// Backward: FlashAttention-2 over key blocks; dK/dV accumulate locally over every query head of the
// group. Tasks are (batch, kv head) pairs owning their heads' dQ rows where there are enough pairs,
// else (pair, key block) with dQ in partials per task range summed in range order (DqPartials).
// bf16 inputs have two forms: every product on f32 after widening (flash_attention_*_kernel), or
// (flash_attention_bf16_dot_*_kernel) every product on bf16 depth pairs: vdpbf16ps in the AVX-512
// build, where it runs at twice the f32 FMA rate on AMD Zen 4 and 5, an FMA emulation of it in the
// others. Q K^T and dO V^T take the bf16 inputs as they are; P and dS (f32 results of the softmax)
// are rounded to bf16 as they enter P V, P^T dO, dS^T Q and dS K, as FlashAttention and PyTorch's
// bf16 SDPA do (the op's float baseline of bf16 inputs rounds them likewise: its tolerance rule).
// Their other operands are packed as pairs along the depth: V, dO, Q, K rows two at a time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/flash_attention/attention_blocks.h"
#include "lathe/ops/flash_attention/attention_tiles.h"
#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using namespace attention_tiles;
using attention_blocks::Geometry;

// kDot (bf16 only): Q K^T and P V on bf16 depth pairs (attention_tiles.h's gemm_pairs, P rounded);
// otherwise on f32 (K^T widened). Either way Q is unscaled and the scores are scaled in the softmax: Q scaled
// element by element rounded each element again, which put the f32 forward at up to 4.4x the
// naive float error at head_dim 192 (1 seed in ~100 of the contract tests failed; none in 3000 since).
template <class Element, bool kDot>
void forward(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config) {
  static_assert(!kDot || std::is_same_v<Element, uint16_t>, "depth pairs are bf16");
  const Geometry g(args.q, args.k, args.v, args.options, config.block_q, config.block_k, W);
  const attention_blocks::ForwardOperands<Element> operands(args);
  const auto [q, k, v, o, lse] = operands;
  const int64_t q_stride = g.n_heads * g.head_dim, kv_stride = g.n_kv_heads * g.head_dim;
  const int64_t v_stride = g.n_kv_heads * g.v_head_dim;
  const int64_t bkp = g.padded_block_k, dp = g.padded_dim, vp = g.padded_v_dim;
  const int64_t pairs = (g.head_dim + 1) / 2, q_pitch = round_up(g.head_dim, 2);  // kDot's depth pairs, Q rows
  const int64_t kt_tile = (kDot ? pairs : g.head_dim) * bkp;                      // floats (kDot: units)
  const int64_t v_tile = (kDot ? (g.block_k + 1) / 2 : g.block_k) * vp;           // floats (kDot: units)
  const int64_t p_pitch = round_up(bkp, 2);                                       // kDot: P's bf16 rows

  // K^T tiles (kDot: K's pairs as units) for every (batch, kv head, key block), packed once; V rows are read in place
  // where they are whole vectors of floats (PV reads only the rows of visible keys), else packed into padded rows too
  // (kDot: pairs of rows as units).
  const bool v_in_place = std::is_same_v<Element, float> && g.v_head_dim % W == 0;
  const int64_t tiles = g.batch * g.n_kv_heads * g.key_blocks;
  const int64_t v_packed = v_in_place ? 0 : tiles * v_tile;
  Arena call(tiles * kt_tile + v_packed, Arena::kCall, /*zeroed=*/false);  // every read element is packed
  float* kt_all = call.take(tiles * kt_tile);
  float* v_all = call.take(v_packed);
  parallel_for(tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t kb = t % g.key_blocks, bg = t / g.key_blocks;
      const int64_t b = bg / g.n_kv_heads, kv_head = bg % g.n_kv_heads;
      const int64_t j0 = kb * g.block_k, count = std::min(g.block_k, g.seq_k - j0);
      const int64_t row = (b * g.seq_k + j0) * g.n_kv_heads + kv_head;
      if constexpr (kDot)
        pack_pairs_transposed(k + row * g.head_dim, kv_stride, count, g.head_dim, bkp,
                              reinterpret_cast<uint32_t*>(kt_all + t * kt_tile));
      else
        pack_transposed(k + row * g.head_dim, kv_stride, count, g.head_dim, bkp, kt_all + t * kt_tile);
      if constexpr (kDot)
        pack_row_pairs(v + row * g.v_head_dim, v_stride, count, g.v_head_dim, vp,
                       reinterpret_cast<uint32_t*>(v_all + t * v_tile));
      else if (!v_in_place)
        pack_rows(v + row * g.v_head_dim, v_stride, count, g.v_head_dim, vp, 1.0f, v_all + t * v_tile);
    }
  });
  // Key block kb of (b, kv_head) as PV's B operand: its first row and the stride between rows.
  auto v_block = [&](int64_t b, int64_t kv_head, int64_t kb) -> std::pair<const float*, int64_t> {
    if (v_in_place)
      return {
          reinterpret_cast<const float*>(v) + ((b * g.seq_k + kb * g.block_k) * g.n_kv_heads + kv_head) * g.v_head_dim,
          v_stride};
    return {v_all + ((b * g.n_kv_heads + kv_head) * g.key_blocks + kb) * v_tile, vp};
  };

  const int64_t query_blocks = (g.seq_q + g.block_q - 1) / g.block_q;
  parallel_for(g.batch * g.n_heads * query_blocks, 1, [&](int64_t begin, int64_t end) {
    Arena arena(g.block_q * (dp + bkp + vp + 1 + W + 64) + (kDot ? g.block_q * p_pitch / 2 : 0), Arena::kTask,
                /*zeroed=*/false);
    float* q_tile = arena.take(g.block_q * dp);
    float* s = arena.take(g.block_q * bkp);
    uint16_t* p_bf16 = reinterpret_cast<uint16_t*>(arena.take(kDot ? g.block_q * p_pitch / 2 : 0));
    float* acc = arena.take(g.block_q * vp);
    attention_blocks::RowStats stats(arena.take(attention_blocks::RowStats::floats(g.block_q)), g.block_q);
    // Task -> (batch, head, first query, rows), query blocks in zigzag order.
    auto task_block = [&](int64_t task, int64_t* b, int64_t* h, int64_t* i0, int64_t* rows) {
      const int64_t qb = zigzag(task % query_blocks, query_blocks), bh = task / query_blocks;
      *b = bh / g.n_heads, *h = bh % g.n_heads, *i0 = qb * g.block_q, *rows = std::min(g.block_q, g.seq_q - *i0);
    };
    for (int64_t task = begin; task < end; ++task) {
      int64_t b, h, i0, rows;
      task_block(task, &b, &h, &i0, &rows);
      const int64_t kv_head = h / g.group;
      const Element* q_block = q + ((b * g.seq_q + i0) * g.n_heads + h) * g.head_dim;
      uint16_t* q_pairs = reinterpret_cast<uint16_t*>(q_tile);  // kDot: bf16 rows of q_pitch (fits)
      if constexpr (kDot)
        pack_bf16_rows(q_block, q_stride, rows, g.head_dim, q_pitch, q_pairs);
      else
        pack_rows(q_block, q_stride, rows, g.head_dim, dp, 1.0f, q_tile);  // scaled in the softmax, as kDot's
      // The next task's Q rows and this task's O rows, brought in one row at a time during the
      // first key block's softmax (issued all at once, they queued ahead of the loads above).
      const Element* next_q = nullptr;
      int64_t next_rows = 0;
      if (task + 1 < end) {
        int64_t nb, nh, ni0;
        task_block(task + 1, &nb, &nh, &ni0, &next_rows);
        next_q = q + ((nb * g.seq_q + ni0) * g.n_heads + nh) * g.head_dim;
      }
      Element* o_block = o + ((b * g.seq_q + i0) * g.n_heads + h) * g.v_head_dim;
      std::memset(acc, 0, sizeof(float) * rows * vp);
      stats.reset(rows);

      int64_t kb_begin, kb_end;
      g.key_block_range(i0, rows, &kb_begin, &kb_end);
      const float* kt_head = kt_all + (b * g.n_kv_heads + kv_head) * g.key_blocks * kt_tile;
      for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
        const int64_t j0 = kb * g.block_k, count = std::min(g.block_k, g.seq_k - j0);
        // Strips of kRows rows stop their products at the last key a row of theirs sees (the
        // strip's last row: visibility ends grow with the row): a causal diagonal block costs
        // about half. Scores past that are left unwritten; the softmax masks them.
        auto strip_end = [&](int64_t r0) {
          int64_t first, end;
          g.tile_keys(i0 + std::min(rows, r0 + kRows) - 1, j0, count, &first, &end);
          return end;
        };
        for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
          const int64_t end = strip_end(r0), n = std::min<int64_t>(kRows, rows - r0);
          if (end <= 0) continue;
          if constexpr (kDot)
            gemm_pairs(n, (end + W - 1) / W, pairs, q_pairs + r0 * q_pitch, q_pitch,
                       reinterpret_cast<const uint32_t*>(kt_head + kb * kt_tile), bkp, s + r0 * bkp, bkp, false);
          else
            gemm(n, (end + W - 1) / W, g.head_dim, q_tile + r0 * dp, dp, 1, kt_head + kb * kt_tile, bkp, s + r0 * bkp,
                 bkp, false);
        }
        for (int64_t r = 0; r < rows; ++r) {
          if (kb == kb_begin) {
            if (r < next_rows) prefetch_rows(next_q + r * q_stride, 1, 0, g.head_dim * sizeof(Element), false);
            prefetch_rows(o_block + r * g.n_heads * g.v_head_dim, 1, 0, g.v_head_dim * sizeof(Element), true);
          }
          int64_t c_begin, c_end;
          g.tile_keys(i0 + r, j0, count, &c_begin, &c_end);
          attention_blocks::online_softmax_row<kDot>(s + r * bkp, bkp, c_begin, c_end, g.scale, g.softcap,
                                                     stats.max + r, stats.row_sum(r), acc + r * vp, vp);
        }
        const auto [v_rows, v_ld] = v_block(b, kv_head, kb);
        for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
          const int64_t end = strip_end(r0), n = std::min<int64_t>(kRows, rows - r0);
          if (end <= 0) continue;
          if constexpr (kDot) {  // P's visible columns rounded, then pairs of keys (P is 0 past `end`)
            round_rows_to_pairs<kNativeBf16Build>(s + r0 * bkp, bkp, n, round_up(end, W), p_bf16 + r0 * p_pitch,
                                                  p_pitch);
            gemm_pairs(n, vp / W, (end + 1) / 2, p_bf16 + r0 * p_pitch, p_pitch,
                       reinterpret_cast<const uint32_t*>(v_rows), vp, acc + r0 * vp, vp, true);
          } else {
            gemm(n, vp / W, end, s + r0 * bkp, bkp, 1, v_rows, v_ld, acc + r0 * vp, vp, true);
          }
        }
      }

      attention_blocks::store_output_rows(g, acc, vp, stats, b, h, i0, rows, o, lse);
    }
  });
}

// kDot (bf16 only): every product on bf16 depth pairs: S = Q K^T and dP = dO V^T (the scores scaled
// in the gradient rows), then dV += P^T dO, dK += dS^T Q (scaled when stored) and dQ += dS K with P
// and dS rounded to bf16 (P^T and dS^T through f32 W x W transposes).
template <class Element, bool kDot>
void backward(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig& config) {
  static_assert(!kDot || std::is_same_v<Element, uint16_t>, "depth pairs are bf16");
  const Geometry g(args.q, args.k, args.v, args.options, config.block_q, config.block_k, W);
  const attention_blocks::BackwardOperands<Element> operands(args);
  const auto [q, k, v, o, d_o, lse, dq, dk, dv] = operands;
  const int64_t q_stride = g.n_heads * g.head_dim, kv_stride = g.n_kv_heads * g.head_dim;
  const int64_t o_stride = g.n_heads * g.v_head_dim, v_stride = g.n_kv_heads * g.v_head_dim;
  const int64_t bkp = g.padded_block_k, dp = g.padded_dim, vp = g.padded_v_dim;
  const int64_t q_pairs = (g.head_dim + 1) / 2, v_pairs = (g.v_head_dim + 1) / 2;         // kDot's depth pairs
  const int64_t q_pitch = round_up(g.head_dim, 2), do_pitch = round_up(g.v_head_dim, 2);  // their bf16 rows
  // kDot: dS's bf16 rows (keys in pairs), and P^T's and dS^T's (queries in pairs; rows_pitch for
  // block_q rows, whole vectors of whole pairs).
  const int64_t ds_pitch = round_up(bkp, 2), rows_pitch = round_up(round_up(g.block_q, 2), W);
  const int64_t query_rows = g.batch * g.n_heads * g.seq_q;
  const int64_t head_tasks = g.batch * g.n_kv_heads;
  const int threads = num_threads();
  // dQ: with enough (batch, kv head) pairs to keep every thread busy, one task per pair owns its
  // heads' dQ rows (summed over its key blocks in a task-local buffer, written once); otherwise
  // tasks are (pair, key block) and dQ goes into partials per task range summed in range order
  // afterwards (zeroing and summing them cost ~5% of a batch 16 x T 256 backward).
  const bool dq_per_head = head_tasks >= 4 * int64_t{threads};
  const int64_t dq_head_floats = g.group * g.seq_q * dp;  // one pair's dQ rows: (head in group, i) x dp

  attention_blocks::DqPartials partials(g, dq_per_head ? 0 : threads, g.seq_q, dp);
  Arena call(partials.floats() + query_rows, Arena::kCall, /*zeroed=*/false);  // partials zeroed by range
  partials.bind(call.take(partials.floats()));
  float* delta = call.take(query_rows);  // D = do . o per query row
  attention_blocks::output_gradient_dots(g, d_o, o, delta);

  // kDot: k_rows, q_tile and do_tile hold K's, Q's and dO's pairs of rows as units (pack_row_pairs).
  struct Scratch {
    float *kt, *vt, *k_rows, *q_tile, *do_tile, *s, *ds, *dk_acc, *dv_acc, *dq_head;
    uint16_t *q_bf16, *do_bf16;              // kDot: the block's Q and dO rows as they are (bf16)
    uint16_t *ds_bf16, *pt_bf16, *dst_bf16;  // kDot: dS, P^T and dS^T rounded
    float* transposed;                       // kDot: P or dS transposed (block_k x rows_pitch)
  };
  auto make_scratch = [&](Arena& arena) {
    Scratch t;
    t.kt = arena.take(g.head_dim * bkp), t.vt = arena.take(g.v_head_dim * bkp);
    t.k_rows = arena.take(g.block_k * dp), t.q_tile = arena.take(g.block_q * dp);
    t.do_tile = arena.take(g.block_q * vp), t.s = arena.take(g.block_q * bkp), t.ds = arena.take(g.block_q * bkp);
    t.dk_acc = arena.take(g.block_k * dp), t.dv_acc = arena.take(g.block_k * vp);
    t.dq_head = arena.take(dq_per_head ? dq_head_floats : 0);
    t.q_bf16 = reinterpret_cast<uint16_t*>(arena.take(kDot ? (g.block_q * q_pitch + 1) / 2 : 0));
    t.do_bf16 = reinterpret_cast<uint16_t*>(arena.take(kDot ? (g.block_q * do_pitch + 1) / 2 : 0));
    t.ds_bf16 = reinterpret_cast<uint16_t*>(arena.take(kDot ? g.block_q * ds_pitch / 2 : 0));
    t.pt_bf16 = reinterpret_cast<uint16_t*>(arena.take(kDot ? g.block_k * rows_pitch / 2 : 0));
    t.dst_bf16 = reinterpret_cast<uint16_t*>(arena.take(kDot ? g.block_k * rows_pitch / 2 : 0));
    t.transposed = arena.take(kDot ? g.block_k * rows_pitch : 0);
    return t;
  };
  const int64_t pair_floats = g.block_q * (q_pitch + do_pitch + ds_pitch) / 2 + 2 * g.block_k * rows_pitch + 2;
  const int64_t scratch_floats = (g.head_dim + g.v_head_dim + 2 * g.block_q) * bkp + (2 * g.block_k + g.block_q) * dp +
                                 (g.block_k + g.block_q) * vp + (dq_per_head ? dq_head_floats : 0) +
                                 (kDot ? pair_floats : 0) + 16 * 16;

  // Key block kb of (b, kv_head): dK and dV rows written; dS K added into dq_rows, where the row
  // of query i of group head hi is dq_rows + (hi * seq_q + i) * dp (unscaled).
  auto key_block = [&](const Scratch& t, int64_t b, int64_t kv_head, int64_t kb, float* dq_rows) {
    const int64_t j0 = kb * g.block_k, count = std::min(g.block_k, g.seq_k - j0);
    const int64_t kv_row = (b * g.seq_k + j0) * g.n_kv_heads + kv_head;
    const int64_t kv_offset = kv_row * g.head_dim, v_offset = kv_row * g.v_head_dim;
    // kDot: kt and vt hold K's and V's pairs as units (fewer than head_dim x bkp floats).
    const uint32_t* k_units = reinterpret_cast<const uint32_t*>(t.kt);
    const uint32_t* v_units = reinterpret_cast<const uint32_t*>(t.vt);
    if constexpr (kDot) {
      pack_pairs_transposed(k + kv_offset, kv_stride, count, g.head_dim, bkp, reinterpret_cast<uint32_t*>(t.kt));
      pack_pairs_transposed(v + v_offset, v_stride, count, g.v_head_dim, bkp, reinterpret_cast<uint32_t*>(t.vt));
    } else {
      pack_transposed(k + kv_offset, kv_stride, count, g.head_dim, bkp, t.kt);
      pack_transposed(v + v_offset, v_stride, count, g.v_head_dim, bkp, t.vt);
    }
    if constexpr (kDot)
      pack_row_pairs(k + kv_offset, kv_stride, count, g.head_dim, dp, reinterpret_cast<uint32_t*>(t.k_rows));
    else
      pack_rows(k + kv_offset, kv_stride, count, g.head_dim, dp, 1.0f, t.k_rows);
    std::memset(t.dk_acc, 0, sizeof(float) * count * dp);
    std::memset(t.dv_acc, 0, sizeof(float) * count * vp);
    // Queries that see any key of this block.
    int64_t i_begin, i_end;
    g.query_range(j0, count, &i_begin, &i_end);
    for (int64_t h = kv_head * g.group; h < (kv_head + 1) * g.group; ++h) {
      const int64_t head_row = (b * g.n_heads + h) * g.seq_q;
      float* dq_head = dq_rows + (h - kv_head * g.group) * g.seq_q * dp;
      for (int64_t i0 = i_begin; i0 < i_end; i0 += g.block_q) {
        const int64_t rows = std::min(g.block_q, i_end - i0);
        const int64_t q_row = (b * g.seq_q + i0) * g.n_heads + h;
        // Rows to bring in while this block computes, one gradient row at a time (issued all at
        // once, they queued ahead of the packing's loads): the next block's Q and dO rows, and in
        // the last block of the last head, the dK and dV rows this key block writes.
        const int64_t next_rows = std::clamp<int64_t>(i_end - i0 - g.block_q, 0, g.block_q);
        const int64_t next_row = q_row + g.block_q * g.n_heads;
        const bool last_block = next_rows == 0 && h + 1 == (kv_head + 1) * g.group;
        if constexpr (kDot) {
          pack_bf16_rows(q + q_row * g.head_dim, q_stride, rows, g.head_dim, q_pitch, t.q_bf16);
          pack_bf16_rows(d_o + q_row * g.v_head_dim, o_stride, rows, g.v_head_dim, do_pitch, t.do_bf16);
          pack_row_pairs(q + q_row * g.head_dim, q_stride, rows, g.head_dim, dp, reinterpret_cast<uint32_t*>(t.q_tile));
          pack_row_pairs(d_o + q_row * g.v_head_dim, o_stride, rows, g.v_head_dim, vp,
                         reinterpret_cast<uint32_t*>(t.do_tile));
        } else {
          pack_rows(q + q_row * g.head_dim, q_stride, rows, g.head_dim, dp, g.scale, t.q_tile);
          pack_rows(d_o + q_row * g.v_head_dim, o_stride, rows, g.v_head_dim, vp, 1.0f, t.do_tile);
        }
        // As in the forward, a strip of query rows stops its products at the last key its last
        // row sees (later columns are left unwritten until the gradient rows zero them), and a
        // strip of keys (dV, dK) starts at the first query row that sees its first key.
        auto visible_end = [&](int64_t r) {
          int64_t first, end;
          g.tile_keys(i0 + r, j0, count, &first, &end);
          return end;
        };
        for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
          const int64_t n = std::min<int64_t>(kRows, rows - r0), end = visible_end(r0 + n - 1);
          if (end == 0) continue;
          if constexpr (kDot) {
            gemm_pairs(n, (end + W - 1) / W, q_pairs, t.q_bf16 + r0 * q_pitch, q_pitch, k_units, bkp, t.s + r0 * bkp,
                       bkp, false);
            gemm_pairs(n, (end + W - 1) / W, v_pairs, t.do_bf16 + r0 * do_pitch, do_pitch, v_units, bkp,
                       t.ds + r0 * bkp, bkp, false);
          } else {
            gemm(n, (end + W - 1) / W, g.head_dim, t.q_tile + r0 * dp, dp, 1, t.kt, bkp, t.s + r0 * bkp, bkp, false);
            gemm(n, (end + W - 1) / W, g.v_head_dim, t.do_tile + r0 * vp, vp, 1, t.vt, bkp, t.ds + r0 * bkp, bkp,
                 false);
          }
        }
        for (int64_t r = 0; r < rows; ++r) {
          if (r < next_rows) {
            prefetch_rows(q + (next_row + r * g.n_heads) * g.head_dim, 1, 0, g.head_dim * sizeof(Element), false);
            prefetch_rows(d_o + (next_row + r * g.n_heads) * g.v_head_dim, 1, 0, g.v_head_dim * sizeof(Element), false);
          }
          if (last_block)
            for (int64_t c = r * count / rows; c < (r + 1) * count / rows; ++c) {
              prefetch_rows(dk + kv_offset + c * kv_stride, 1, 0, g.head_dim * sizeof(Element), true);
              prefetch_rows(dv + v_offset + c * v_stride, 1, 0, g.v_head_dim * sizeof(Element), true);
            }
          int64_t c_begin, c_end;
          g.tile_keys(i0 + r, j0, count, &c_begin, &c_end);
          attention_blocks::gradient_block_row<kDot>(t.s + r * bkp, t.ds + r * bkp, bkp, c_begin, c_end,
                                                     kDot ? g.scale : 1.0f, g.softcap, lse[head_row + i0 + r],
                                                     delta[head_row + i0 + r]);
        }
        const int64_t pitch = round_up(round_up(rows, 2), W);  // kDot: P^T's and dS^T's rows (zero past rows)
        // kDot: P and dS rounded to bf16 as they enter their products (dS rows, P^T and dS^T).
        if constexpr (kDot) {
          round_rows_to_pairs<kNativeBf16Build>(t.ds, bkp, rows, bkp, t.ds_bf16, ds_pitch);
          round_transposed<kNativeBf16Build>(t.s, bkp, rows, count, pitch, t.transposed, t.pt_bf16);
          round_transposed<kNativeBf16Build>(t.ds, bkp, rows, count, pitch, t.transposed, t.dst_bf16);
        }
        int64_t first_row = 0;  // the first query row that sees key c0 or later
        for (int64_t c0 = 0; c0 < count; c0 += kRows) {
          while (first_row < rows && visible_end(first_row) <= c0) ++first_row;
          if (first_row == rows) break;
          const int64_t n = std::min<int64_t>(kRows, count - c0);
          if constexpr (kDot) {  // from an even row (rows before first_row hold zeros at these keys)
            const int64_t r0 = first_row / 2 * 2, depth_pairs = (rows - r0 + 1) / 2;
            gemm_pairs(n, vp / W, depth_pairs, t.pt_bf16 + c0 * pitch + r0, pitch,
                       reinterpret_cast<const uint32_t*>(t.do_tile) + r0 / 2 * vp, vp, t.dv_acc + c0 * vp, vp, true);
            gemm_pairs(n, dp / W, depth_pairs, t.dst_bf16 + c0 * pitch + r0, pitch,
                       reinterpret_cast<const uint32_t*>(t.q_tile) + r0 / 2 * dp, dp, t.dk_acc + c0 * dp, dp, true);
          } else {
            const int64_t depth = rows - first_row, at = first_row * bkp + c0;
            gemm(n, vp / W, depth, t.s + at, 1, bkp, t.do_tile + first_row * vp, vp, t.dv_acc + c0 * vp, vp,
                 true);  // dV += P^T dO
            gemm(n, dp / W, depth, t.ds + at, 1, bkp, t.q_tile + first_row * dp, dp, t.dk_acc + c0 * dp, dp,
                 true);  // dK += dS^T (scale Q)
          }
        }
        for (int64_t r0 = 0; r0 < rows; r0 += kRows) {  // dQ += dS K
          const int64_t n = std::min<int64_t>(kRows, rows - r0), end = visible_end(r0 + n - 1);
          if (end <= 0) continue;
          if constexpr (kDot)
            gemm_pairs(n, dp / W, (end + 1) / 2, t.ds_bf16 + r0 * ds_pitch, ds_pitch,
                       reinterpret_cast<const uint32_t*>(t.k_rows), dp, dq_head + (i0 + r0) * dp, dp, true);
          else
            gemm(n, dp / W, end, t.ds + r0 * bkp, bkp, 1, t.k_rows, dp, dq_head + (i0 + r0) * dp, dp, true);
        }
      }
    }
    const VecF dk_scale = VecF::broadcast(kDot ? g.scale : 1.0f);  // kDot: dS^T Q of unscaled Q
    for (int64_t c = 0; c < count; ++c) {
      for (int64_t d = 0; d < g.head_dim; d += W)
        store_lanes(VecF::load(t.dk_acc + c * dp + d) * dk_scale, dk + kv_offset + c * kv_stride + d, g.head_dim - d);
      for (int64_t d = 0; d < g.v_head_dim; d += W)
        store_lanes(VecF::load(t.dv_acc + c * vp + d), dv + v_offset + c * v_stride + d, g.v_head_dim - d);
    }
  };

  if (dq_per_head) {
    parallel_for(head_tasks, 1, [&](int64_t begin, int64_t end) {
      Arena arena(scratch_floats, Arena::kTask, /*zeroed=*/false);  // every read element is written first
      const Scratch t = make_scratch(arena);
      const VecF scale = VecF::broadcast(g.scale);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / g.n_kv_heads, kv_head = task % g.n_kv_heads;
        std::memset(t.dq_head, 0, sizeof(float) * dq_head_floats);
        for (int64_t kb = 0; kb < g.key_blocks; ++kb) key_block(t, b, kv_head, kb, t.dq_head);
        for (int64_t hi = 0; hi < g.group; ++hi)
          for (int64_t i = 0; i < g.seq_q; ++i) {
            const float* row = t.dq_head + (hi * g.seq_q + i) * dp;
            Element* out = dq + ((b * g.seq_q + i) * g.n_heads + kv_head * g.group + hi) * g.head_dim;
            for (int64_t d = 0; d < g.head_dim; d += W)
              store_lanes(VecF::load(row + d) * scale, out + d, g.head_dim - d);
          }
      }
    });
    return;
  }

  parallel_run([&](int thread, int thread_count) {
    Arena arena(scratch_floats, Arena::kTask, /*zeroed=*/false);  // every read element is written first
    const Scratch t = make_scratch(arena);
    partials.run_ranges(thread, thread_count, [&](int range, int64_t bg, int64_t kb) {
      key_block(t, bg / g.n_kv_heads, bg % g.n_kv_heads, kb, partials.pair_rows(range, bg));
    });
  });

  // dq = scale * the partials summed in range order.
  partials.sum(dq);
}

}  // namespace

// simd::exp2_softmax over n values (a multiple of the vector width), for the tests: the
// exponential of every softmax whose P is rounded to bf16 (the vdpbf16ps and AMX kernels).
void flash_attention_softmax_exp2(const float* t, int64_t n, float* p) {
  for (int64_t i = 0; i < n; i += W) simd::exp2_softmax(VecF::load(t + i)).store(p + i);
}

void flash_attention_forward_kernel(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config) {
  if (args.q.dtype == DType::bf16)
    forward<uint16_t, false>(args, config);
  else
    forward<float, false>(args, config);
}

void flash_attention_backward_kernel(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig& config) {
  if (args.q.dtype == DType::bf16)
    backward<uint16_t, false>(args, config);
  else
    backward<float, false>(args, config);
}

void flash_attention_bf16_dot_forward_kernel(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config) {
  LATHE_ASSERT(args.q.dtype == DType::bf16);  // its implementations support bf16 only
  forward<uint16_t, true>(args, config);
}

void flash_attention_bf16_dot_backward_kernel(const FlashAttentionBackwardArgs& args,
                                              const FlashAttentionCpuConfig& config) {
  LATHE_ASSERT(args.q.dtype == DType::bf16);  // its implementations support bf16 only
  backward<uint16_t, true>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
