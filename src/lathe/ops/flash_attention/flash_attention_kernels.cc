// Flash attention CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// Forward: K is packed once into transposed tiles (head_dim x block_k, keys along the vector) and V
// into rows padded to whole vectors (v_head_dim wide, which may differ from head_dim); each task
// (batch, head, query block) keeps a block_q x block_k score tile, an online softmax (running max m,
// sum l) and a block_q x v_head_dim accumulator. Products are
// register-blocked microkernels (6 rows x up to 4 vectors of accumulators).
// Backward: FlashAttention-2 over (batch, kv head, key block) tasks; dK/dV accumulate locally over
// every query head of the group, dQ goes into per-thread partials summed in thread order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/flash_attention/attention_tiles.h"
#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using namespace attention_tiles;

// tanh accurate to a few ulp also near 0 (Cephes tanhf polynomial below 0.625, where
// 1 - 2 / (exp(2x) + 1) would cancel).
inline VecF accurate_tanh(VecF x) {
  const VecF magnitude = simd::max(x, VecF::zero() - x);
  const VecF small_x = simd::min(simd::max(x, VecF::broadcast(-0.625f)), VecF::broadcast(0.625f));
  const VecF z = small_x * small_x;
  VecF poly = VecF::broadcast(-5.70498872745e-3f);
  poly = simd::fma(poly, z, VecF::broadcast(2.06390887954e-2f));
  poly = simd::fma(poly, z, VecF::broadcast(-5.37397155531e-2f));
  poly = simd::fma(poly, z, VecF::broadcast(1.33314422036e-1f));
  poly = simd::fma(poly, z, VecF::broadcast(-3.33332819422e-1f));
  const VecF small = simd::fma(poly * z, small_x, small_x);
  const VecF large = VecF::broadcast(1.0f) - VecF::broadcast(2.0f) / (simd::exp(x + x) + VecF::broadcast(1.0f));
  return simd::zero_below(large, magnitude, 0.625f) + (small - simd::zero_below(small, magnitude, 0.625f));
}

struct Geometry {
  int64_t batch, seq_q, seq_k, n_heads, n_kv_heads, head_dim, v_head_dim, group;
  int64_t block_q, block_k, padded_block_k, padded_dim, padded_v_dim, key_blocks;
  float scale, softcap;
  bool causal;
  int64_t window;

  Geometry(const TensorView& q, const TensorView& k, const TensorView& v, const FlashAttentionOptions& options,
           const FlashAttentionCpuConfig& config) {
    batch = q.dim(0), seq_q = q.dim(1), n_heads = q.dim(2), head_dim = q.dim(3), v_head_dim = v.dim(3);
    seq_k = k.dim(1), n_kv_heads = k.dim(2);
    group = n_kv_heads > 0 ? n_heads / n_kv_heads : 1;
    block_q = std::max<int64_t>(1, config.block_q);
    block_k = std::max<int64_t>(1, config.block_k);
    padded_block_k = round_up(block_k, W);
    padded_dim = round_up(head_dim, W);
    padded_v_dim = round_up(v_head_dim, W);
    key_blocks = (seq_k + block_k - 1) / block_k;
    scale = attention_scale(options, head_dim);
    softcap = options.softcap;
    causal = options.causal;
    window = options.window;
  }
  // Keys visible to query i: [begin, end).
  void keys(int64_t i, int64_t* begin, int64_t* end) const {
    const int64_t aligned = i + seq_k - seq_q;
    *end = causal ? std::min(seq_k, aligned + 1) : seq_k;
    *begin = (causal && window > 0) ? std::max<int64_t>(0, aligned - window + 1) : 0;
  }
  // Visible keys of query i within the tile [j0, j0 + count), relative to j0.
  void tile_keys(int64_t i, int64_t j0, int64_t count, int64_t* begin, int64_t* end) const {
    keys(i, begin, end);
    *begin = std::clamp<int64_t>(*begin - j0, 0, count);
    *end = std::clamp<int64_t>(*end - j0, 0, count);
  }
};

void apply_softcap(float* row, int64_t length, float softcap) {
  const VecF cap = VecF::broadcast(softcap), inverse = VecF::broadcast(1.0f / softcap);
  for (int64_t c = 0; c < length; c += W) (cap * accurate_tanh(VecF::load(row + c) * inverse)).store(row + c);
}

template <class Element>
void forward(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config) {
  const Geometry g(args.q, args.k, args.v, args.options, config);
  const Element* q = static_cast<const Element*>(args.q.data);
  const Element* k = static_cast<const Element*>(args.k.data);
  const Element* v = static_cast<const Element*>(args.v.data);
  Element* o = static_cast<Element*>(args.o.data);
  float* lse = args.lse.ptr<float>();
  const int64_t q_stride = g.n_heads * g.head_dim, kv_stride = g.n_kv_heads * g.head_dim;
  const int64_t v_stride = g.n_kv_heads * g.v_head_dim;
  const int64_t bkp = g.padded_block_k, dp = g.padded_dim, vp = g.padded_v_dim;
  const int64_t kt_tile = g.head_dim * bkp, v_tile = g.block_k * vp;

  // K^T tiles and padded V rows for every (batch, kv head, key block), packed once.
  const int64_t tiles = g.batch * g.n_kv_heads * g.key_blocks;
  AlignedBuffer kt_buffer, v_buffer;
  float* kt_all = scratch(kt_buffer, tiles * kt_tile);
  float* v_all = scratch(v_buffer, tiles * v_tile);
  parallel_for(tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t kb = t % g.key_blocks, bg = t / g.key_blocks;
      const int64_t b = bg / g.n_kv_heads, kv_head = bg % g.n_kv_heads;
      const int64_t j0 = kb * g.block_k, count = std::min(g.block_k, g.seq_k - j0);
      const int64_t row = (b * g.seq_k + j0) * g.n_kv_heads + kv_head;
      pack_transposed(k + row * g.head_dim, kv_stride, count, g.head_dim, g.padded_block_k, kt_all + t * kt_tile);
      pack_rows(v + row * g.v_head_dim, v_stride, count, g.v_head_dim, vp, 1.0f, v_all + t * v_tile);
    }
  });

  const int64_t query_blocks = (g.seq_q + g.block_q - 1) / g.block_q;
  parallel_for(g.batch * g.n_heads * query_blocks, 1, [&](int64_t begin, int64_t end) {
    AlignedBuffer q_buffer, s_buffer, acc_buffer, stat_buffer;
    float* q_tile = scratch(q_buffer, g.block_q * dp);
    float* s = scratch(s_buffer, g.block_q * bkp);
    float* acc = scratch(acc_buffer, g.block_q * vp);
    float* stats = scratch(stat_buffer, 2 * g.block_q);
    float* row_max = stats;
    float* row_sum = stats + g.block_q;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t qb = zigzag(task % query_blocks, query_blocks), bh = task / query_blocks;
      const int64_t b = bh / g.n_heads, h = bh % g.n_heads, kv_head = h / g.group;
      const int64_t i0 = qb * g.block_q, rows = std::min(g.block_q, g.seq_q - i0);
      const Element* q_block = q + ((b * g.seq_q + i0) * g.n_heads + h) * g.head_dim;
      pack_rows(q_block, q_stride, rows, g.head_dim, dp, g.scale, q_tile);
      std::memset(acc, 0, sizeof(float) * rows * vp);
      for (int64_t r = 0; r < rows; ++r) row_max[r] = -INFINITY, row_sum[r] = 0.0f;

      int64_t first_begin, first_end, last_begin, last_end;
      g.keys(i0, &first_begin, &first_end);
      g.keys(i0 + rows - 1, &last_begin, &last_end);
      const int64_t kb_begin = first_begin / g.block_k;
      const int64_t kb_end = last_end > first_begin ? (last_end + g.block_k - 1) / g.block_k : kb_begin;
      const float* kt_head = kt_all + (b * g.n_kv_heads + kv_head) * g.key_blocks * kt_tile;
      const float* v_head = v_all + (b * g.n_kv_heads + kv_head) * g.key_blocks * v_tile;
      for (int64_t kb = kb_begin; kb < kb_end; ++kb) {
        const int64_t j0 = kb * g.block_k, count = std::min(g.block_k, g.seq_k - j0);
        gemm(rows, bkp / W, g.head_dim, q_tile, dp, 1, kt_head + kb * kt_tile, bkp, s, bkp, false);
        for (int64_t r = 0; r < rows; ++r) {
          float* s_row = s + r * bkp;
          int64_t c_begin, c_end;
          g.tile_keys(i0 + r, j0, count, &c_begin, &c_end);
          if (c_end <= c_begin) {
            std::memset(s_row, 0, sizeof(float) * bkp);
            continue;
          }
          if (g.softcap > 0) apply_softcap(s_row, bkp, g.softcap);
          for (int64_t c = 0; c < c_begin; ++c) s_row[c] = kMaskedScore;
          for (int64_t c = c_end; c < bkp; ++c) s_row[c] = kMaskedScore;
          VecF tile_max = VecF::broadcast(kMaskedScore);
          for (int64_t c = 0; c < bkp; c += W) tile_max = simd::max(tile_max, VecF::load(s_row + c));
          const float new_max = std::max(row_max[r], tile_max.reduce_max());
          const float alpha = std::exp(row_max[r] - new_max);
          const VecF shift = VecF::broadcast(new_max);
          VecF sum = VecF::zero();
          for (int64_t c = 0; c < bkp; c += W) {
            VecF p = simd::exp(VecF::load(s_row + c) - shift);
            p.store(s_row + c);
            sum += p;
          }
          row_sum[r] = row_sum[r] * alpha + sum.reduce_add();
          row_max[r] = new_max;
          if (alpha != 1.0f) {
            const VecF factor = VecF::broadcast(alpha);
            for (int64_t d = 0; d < vp; d += W) (VecF::load(acc + r * vp + d) * factor).store(acc + r * vp + d);
          }
        }
        gemm(rows, vp / W, count, s, bkp, 1, v_head + kb * v_tile, vp, acc, vp, true);
      }

      for (int64_t r = 0; r < rows; ++r) {
        Element* o_row = o + ((b * g.seq_q + i0 + r) * g.n_heads + h) * g.v_head_dim;
        const bool empty = row_sum[r] == 0.0f;
        const VecF factor = VecF::broadcast(empty ? 0.0f : 1.0f / row_sum[r]);
        for (int64_t d = 0; d < g.v_head_dim; d += W)
          store_lanes(VecF::load(acc + r * vp + d) * factor, o_row + d, g.v_head_dim - d);
        lse[(b * g.n_heads + h) * g.seq_q + i0 + r] = empty ? -INFINITY : row_max[r] + std::log(row_sum[r]);
      }
    }
  });
}

template <class Element>
void backward(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig& config) {
  const Geometry g(args.q, args.k, args.v, args.options, config);
  const Element* q = static_cast<const Element*>(args.q.data);
  const Element* k = static_cast<const Element*>(args.k.data);
  const Element* v = static_cast<const Element*>(args.v.data);
  const Element* o = static_cast<const Element*>(args.o.data);
  const Element* d_o = static_cast<const Element*>(args.d_o.data);
  const float* lse = args.lse.ptr<float>();
  Element* dq = static_cast<Element*>(args.dq.data);
  Element* dk = static_cast<Element*>(args.dk.data);
  Element* dv = static_cast<Element*>(args.dv.data);
  const int64_t q_stride = g.n_heads * g.head_dim, kv_stride = g.n_kv_heads * g.head_dim;
  const int64_t o_stride = g.n_heads * g.v_head_dim, v_stride = g.n_kv_heads * g.v_head_dim;
  const int64_t bkp = g.padded_block_k, dp = g.padded_dim, vp = g.padded_v_dim;
  const int64_t query_rows = g.batch * g.n_heads * g.seq_q;

  // delta[(b, h, i)] = do[b, i, h] . o[b, i, h]
  AlignedBuffer delta_buffer;
  float* delta = scratch(delta_buffer, query_rows);
  parallel_for(query_rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // row = (b * seq_q + i) * n_heads + h
      const int64_t h = row % g.n_heads, bi = row / g.n_heads, b = bi / g.seq_q, i = bi % g.seq_q;
      float sum = 0.0f;
      for (int64_t d = 0; d < g.v_head_dim; ++d)
        sum += to_float(d_o[row * g.v_head_dim + d]) * to_float(o[row * g.v_head_dim + d]);
      delta[(b * g.n_heads + h) * g.seq_q + i] = sum;
    }
  });

  // Per-thread dQ partials (rows (b, h, i), padded head_dim), summed in thread order afterwards.
  const int threads = num_threads();
  const int64_t partial_floats = query_rows * dp;
  AlignedBuffer partial_buffer;
  float* partials = scratch(partial_buffer, threads * partial_floats);
  const int64_t tasks = g.batch * g.n_kv_heads * g.key_blocks;
  const int64_t offset = g.seq_k - g.seq_q;
  const VecF cap = VecF::broadcast(g.softcap), inverse_cap = VecF::broadcast(g.softcap > 0 ? 1.0f / g.softcap : 0.0f);
  parallel_run([&](int thread, int thread_count) {
    if (thread >= threads) return;  // partials exist for num_threads() threads (zeroed at allocation)
    float* dq_partial = partials + thread * partial_floats;
    AlignedBuffer buffers[9];
    float* kt = scratch(buffers[0], g.head_dim * bkp);
    float* vt = scratch(buffers[1], g.v_head_dim * bkp);
    float* k_rows = scratch(buffers[2], g.block_k * dp);
    float* q_tile = scratch(buffers[3], g.block_q * dp);
    float* do_tile = scratch(buffers[4], g.block_q * vp);
    float* s = scratch(buffers[5], g.block_q * bkp);
    float* ds = scratch(buffers[6], g.block_q * bkp);
    float* dk_acc = scratch(buffers[7], g.block_k * dp);
    float* dv_acc = scratch(buffers[8], g.block_k * vp);
    const int64_t task_begin = tasks * thread / thread_count, task_end = tasks * (thread + 1) / thread_count;
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int64_t kb = zigzag(task % g.key_blocks, g.key_blocks), bg = task / g.key_blocks;
      const int64_t b = bg / g.n_kv_heads, kv_head = bg % g.n_kv_heads;
      const int64_t j0 = kb * g.block_k, count = std::min(g.block_k, g.seq_k - j0);
      const int64_t kv_row = (b * g.seq_k + j0) * g.n_kv_heads + kv_head;
      const int64_t kv_offset = kv_row * g.head_dim, v_offset = kv_row * g.v_head_dim;
      pack_transposed(k + kv_offset, kv_stride, count, g.head_dim, g.padded_block_k, kt);
      pack_transposed(v + v_offset, v_stride, count, g.v_head_dim, g.padded_block_k, vt);
      pack_rows(k + kv_offset, kv_stride, count, g.head_dim, dp, 1.0f, k_rows);
      std::memset(dk_acc, 0, sizeof(float) * count * dp);
      std::memset(dv_acc, 0, sizeof(float) * count * vp);
      // Queries that see any key of this block.
      const int64_t i_begin = std::clamp<int64_t>(g.causal ? j0 - offset : 0, 0, g.seq_q);
      const int64_t i_end =
          g.window > 0 ? std::clamp<int64_t>(j0 + count - offset + g.window - 1, 0, g.seq_q) : g.seq_q;
      for (int64_t h = kv_head * g.group; h < (kv_head + 1) * g.group; ++h) {
        const int64_t head_row = (b * g.n_heads + h) * g.seq_q;
        for (int64_t i0 = i_begin; i0 < i_end; i0 += g.block_q) {
          const int64_t rows = std::min(g.block_q, i_end - i0);
          const int64_t q_row = (b * g.seq_q + i0) * g.n_heads + h;
          pack_rows(q + q_row * g.head_dim, q_stride, rows, g.head_dim, dp, g.scale, q_tile);
          pack_rows(d_o + q_row * g.v_head_dim, o_stride, rows, g.v_head_dim, vp, 1.0f, do_tile);
          gemm(rows, bkp / W, g.head_dim, q_tile, dp, 1, kt, bkp, s, bkp, false);
          gemm(rows, bkp / W, g.v_head_dim, do_tile, vp, 1, vt, bkp, ds, bkp, false);
          for (int64_t r = 0; r < rows; ++r) {
            float* s_row = s + r * bkp;
            float* ds_row = ds + r * bkp;
            int64_t c_begin, c_end;
            g.tile_keys(i0 + r, j0, count, &c_begin, &c_end);
            if (c_end <= c_begin) {
              std::memset(s_row, 0, sizeof(float) * bkp);
              std::memset(ds_row, 0, sizeof(float) * bkp);
              continue;
            }
            const VecF row_lse = VecF::broadcast(lse[head_row + i0 + r]);
            const VecF row_delta = VecF::broadcast(delta[head_row + i0 + r]);
            for (int64_t c = 0; c < bkp; c += W) {
              VecF score = VecF::load(s_row + c);
              VecF t = VecF::zero();
              if (g.softcap > 0) {
                t = accurate_tanh(score * inverse_cap);
                score = cap * t;
              }
              VecF p = simd::exp(score - row_lse);
              VecF grad = p * (VecF::load(ds_row + c) - row_delta);
              if (g.softcap > 0) grad = simd::fnma(grad * t, t, grad);  // * (1 - t^2)
              p.store(s_row + c);
              grad.store(ds_row + c);
            }
            for (int64_t c = 0; c < c_begin; ++c) s_row[c] = 0.0f, ds_row[c] = 0.0f;
            for (int64_t c = c_end; c < bkp; ++c) s_row[c] = 0.0f, ds_row[c] = 0.0f;
          }
          gemm(count, vp / W, rows, s, 1, bkp, do_tile, vp, dv_acc, vp, true);  // dV += P^T dO
          gemm(count, dp / W, rows, ds, 1, bkp, q_tile, dp, dk_acc, dp, true);  // dK += dS^T (scale Q)
          gemm(rows, dp / W, count, ds, bkp, 1, k_rows, dp, dq_partial + (head_row + i0) * dp, dp, true);
        }
      }
      for (int64_t c = 0; c < count; ++c) {
        for (int64_t d = 0; d < g.head_dim; d += W)
          store_lanes(VecF::load(dk_acc + c * dp + d), dk + kv_offset + c * kv_stride + d, g.head_dim - d);
        for (int64_t d = 0; d < g.v_head_dim; d += W)
          store_lanes(VecF::load(dv_acc + c * vp + d), dv + v_offset + c * v_stride + d, g.v_head_dim - d);
      }
    }
  });

  // dq = scale * sum over threads (in thread order) of the partials.
  const VecF scale = VecF::broadcast(g.scale);
  parallel_for(query_rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // row = (b * seq_q + i) * n_heads + h
      const int64_t h = row % g.n_heads, bi = row / g.n_heads, b = bi / g.seq_q, i = bi % g.seq_q;
      const int64_t partial_row = ((b * g.n_heads + h) * g.seq_q + i) * dp;
      for (int64_t d = 0; d < g.head_dim; d += W) {
        VecF sum = VecF::load(partials + partial_row + d);
        for (int t = 1; t < threads; ++t) sum += VecF::load(partials + t * partial_floats + partial_row + d);
        store_lanes(sum * scale, dq + row * g.head_dim + d, g.head_dim - d);
      }
    }
  });
}

}  // namespace

void flash_attention_forward_kernel(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config) {
  if (args.q.dtype == DType::bf16)
    forward<uint16_t>(args, config);
  else
    forward<float>(args, config);
}

void flash_attention_backward_kernel(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig& config) {
  if (args.q.dtype == DType::bf16)
    backward<uint16_t>(args, config);
  else
    backward<float>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
