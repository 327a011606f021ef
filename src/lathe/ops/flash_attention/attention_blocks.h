// What the flash attention kernels share, whatever does their products: the vector kernels
// (flash_attention_kernels.cc, register-blocked f32 microkernels) and the AMX tile kernels
// (flash_attention_amx_kernels.cc, tdpbf16ps on real tiles or on the emulation):
//   Geometry              shapes, block sizes padded to the kernel's multiple, visibility per query
//   RowStats              the online softmax's per-row max and sum lanes (forward)
//   advance_row_max       a row's max moved only where a block exceeds it by ln 256 (forward)
//   online_softmax_row    one score row of a block through the online softmax (forward)
//   GradientLanes         p and ds = p * (dp - D) [* (1 - tanh^2)] for W keys of a row (backward)
//   gradient_block_row    one row of p and ds through GradientLanes (backward)
//   store_output_rows     o = acc / row sum and lse = max + log(sum) for a block's rows (forward)
//   output_gradient_dots  D[i] = do[i] . o[i] (backward)
//   DqPartials            dQ partials of the (pair, key block) ranges, each over the pairs it touches,
//                         zeroed by the thread of the range, summed in range order (backward)
// Kernel sources only (after simd.h): everything lives in lathe::LATHE_ISA_NS::attention_blocks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/flash_attention/attention_tiles.h"
#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe::LATHE_ISA_NS::attention_blocks {

using attention_tiles::kMaskedScore;
using attention_tiles::round_up;
using attention_tiles::store_lanes;
using attention_tiles::to_float;
using simd::VecF;
constexpr int W = VecF::width;
constexpr float kLog2e = 1.44269504088896341f;

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

  // Blocks of block_q queries and block_k keys (at least 1); key blocks and widths padded to a
  // multiple of `multiple` (the vector width, or the tiles' 32).
  Geometry(const TensorView& q, const TensorView& k, const TensorView& v, const FlashAttentionOptions& options,
           int64_t queries_per_block, int64_t keys_per_block, int64_t multiple) {
    batch = q.dim(0), seq_q = q.dim(1), n_heads = q.dim(2), head_dim = q.dim(3), v_head_dim = v.dim(3);
    seq_k = k.dim(1), n_kv_heads = k.dim(2);
    group = n_kv_heads > 0 ? n_heads / n_kv_heads : 1;
    block_q = std::max<int64_t>(1, queries_per_block);
    block_k = std::max<int64_t>(1, keys_per_block);
    padded_block_k = round_up(block_k, multiple);
    padded_dim = round_up(head_dim, multiple);
    padded_v_dim = round_up(v_head_dim, multiple);
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
  // Key blocks [*first, *last) that queries [i0, i0 + rows) see.
  void key_block_range(int64_t i0, int64_t rows, int64_t* first, int64_t* last) const {
    int64_t first_begin, first_end, last_begin, last_end;
    keys(i0, &first_begin, &first_end);
    keys(i0 + rows - 1, &last_begin, &last_end);
    *first = first_begin / block_k;
    *last = last_end > first_begin ? (last_end + block_k - 1) / block_k : *first;
  }
  // Queries [*begin, *end) that see any key of the block [j0, j0 + count).
  void query_range(int64_t j0, int64_t count, int64_t* begin, int64_t* end) const {
    const int64_t offset = seq_k - seq_q;
    *begin = std::clamp<int64_t>(causal ? j0 - offset : 0, 0, seq_q);
    *end = window > 0 ? std::clamp<int64_t>(j0 + count - offset + window - 1, 0, seq_q) : seq_q;
  }
};

inline void apply_softcap(float* row, int64_t length, float softcap) {
  const VecF cap = VecF::broadcast(softcap), inverse = VecF::broadcast(1.0f / softcap);
  for (int64_t c = 0; c < length; c += W) (cap * accurate_tanh(VecF::load(row + c) * inverse)).store(row + c);
}

// A row's running max is kept until a block's scores exceed it by more than this (ln 256): the
// row's p = exp(score - kept max) then stay below 256, and the output accumulator's rescale (a
// pass over v_head_dim floats per row and block, as many as the block's keys at head_dim 64) is
// skipped, as FlashAttention-4 does. o = acc / sum and lse = max + log(sum) hold for any max a row
// used throughout.
constexpr float kRescaleThreshold = 5.5451774f;

// The online softmax's running state for a block of query rows: each row's max (the one its p
// are taken against) and its sum of p as W partial lanes, added across lanes once, by
// store_output_rows. (Reduced per row and key block, the horizontal sum and max were a fifth of
// the AMX forward's vector work at head_dim 64.)
struct RowStats {
  float* max;   // rows
  float* sums;  // rows x W lanes
  static int64_t floats(int64_t rows) { return rows * (1 + W); }
  RowStats(float* storage, int64_t rows) : max(storage), sums(storage + rows) {}
  void reset(int64_t rows) {
    for (int64_t r = 0; r < rows; ++r) max[r] = -INFINITY;
    std::memset(sums, 0, sizeof(float) * rows * W);
  }
  float* row_sum(int64_t r) const { return sums + r * W; }
};

// Row r's max for a block whose scores' lanewise max is scale * raw_max (scale > 0): set by the
// row's first block; afterwards moved only where the block exceeds it by more than
// kRescaleThreshold, which a lanewise compare finds without a horizontal max. Returns the factor
// (exp(old - new) or 1) the row's sum and accumulator are to be multiplied by.
[[gnu::always_inline]] inline float advance_row_max(VecF raw_max, float scale, float* row_max) {
  if (*row_max == -INFINITY) {
    *row_max = raw_max.reduce_max() * scale;
    return 1.0f;  // the sum and the accumulator are still 0
  }
  if (!simd::any_greater(raw_max * VecF::broadcast(scale), VecF::broadcast(*row_max + kRescaleThreshold))) return 1.0f;
  const float block_max = raw_max.reduce_max() * scale;
  // The vector exp on one lane: a libm call here spilled the caller's registers once per row and
  // block (5% of the forward's softmax samples on Zen 3).
  const float alpha = simd::exp(VecF::broadcast(*row_max - block_max)).first();
  *row_max = block_max;
  return alpha;
}

// A row's sum lanes = sum lanes * alpha + the block's p summed lanewise.
[[gnu::always_inline]] inline void add_row_sum(float* sum_lanes, VecF block_sum, float alpha) {
  const VecF kept = VecF::load(sum_lanes);
  (alpha == 1.0f ? kept + block_sum : simd::fma(kept, VecF::broadcast(alpha), block_sum)).store(sum_lanes);
}

// The row's output accumulator (length floats, a multiple of W) times alpha, where that is not 1.
[[gnu::always_inline]] inline void rescale_accumulator(float* acc_row, int64_t length, float alpha) {
  if (alpha == 1.0f) return;
  const VecF factor = VecF::broadcast(alpha);
  for (int64_t d = 0; d < length; d += W) (VecF::load(acc_row + d) * factor).store(acc_row + d);
}

// One row of a score block (length a multiple of W) through the online softmax: scores times
// score_scale (1: already scaled), soft-capped, keys outside [c_begin, c_end) masked; the row
// becomes p = exp(score - the row's max) (0 where masked), the max advanced by advance_row_max,
// its sum lanes and its output accumulator (acc_length floats, a multiple of W) rescaled where the
// max moved. A row without a visible key becomes zeros. Only the vectors up to the one holding
// key c_end - 1 are read and exponentiated; later ones are stored as zeros (in a causal diagonal
// block, about half the row). kPRoundedToBf16: P is rounded to bf16 for its product, so the
// exponential is simd::exp2_softmax's (1.6e-7 relative) instead of exp's. kWriteBf16 (with it):
// P goes to p_bf16 (length values) as bf16 instead of back to s_row, which then keeps the scores
// (the AMX forward). The sum is of the f32 p either way. Always inlined: called per row, the call
// cost the forward 2-4% (docs/perf.md).
template <bool kPRoundedToBf16 = false, bool kWriteBf16 = false>
[[gnu::always_inline]] inline void online_softmax_row(float* s_row, int64_t length, int64_t c_begin, int64_t c_end,
                                                      float score_scale, float softcap, float* row_max,
                                                      float* sum_lanes, float* acc_row, int64_t acc_length,
                                                      uint16_t* p_bf16 = nullptr) {
  static_assert(kPRoundedToBf16 || !kWriteBf16, "P written as bf16 is P rounded to bf16");
  if (c_end <= c_begin) {
    if constexpr (kWriteBf16)
      std::memset(p_bf16, 0, sizeof(uint16_t) * length);
    else
      std::memset(s_row, 0, sizeof(float) * length);
    return;
  }
  const int64_t live = std::min(length, round_up(c_end, W));
  // Without a soft cap a scale of at least 1e-6 goes into the max pass (one pass over the row
  // fewer): the masked keys, marked first, become kMaskedScore * scale <= -1e24, whose exp is 0.
  const bool scale_in_max_pass = score_scale >= 1e-6f && score_scale != 1.0f && softcap <= 0;
  if (score_scale != 1.0f && !scale_in_max_pass) {
    const VecF factor = VecF::broadcast(score_scale);
    for (int64_t c = 0; c < live; c += W) (VecF::load(s_row + c) * factor).store(s_row + c);
  }
  if (softcap > 0) apply_softcap(s_row, live, softcap);
  for (int64_t c = 0; c < c_begin; ++c) s_row[c] = kMaskedScore;
  for (int64_t c = c_end; c < live; ++c) s_row[c] = kMaskedScore;
  // kPRoundedToBf16 folds that scale into the exponential's FMA instead (scores left unscaled).
  const bool fold_scale = kPRoundedToBf16 && scale_in_max_pass;
  VecF tile_max = VecF::broadcast(kMaskedScore);
  if (scale_in_max_pass && !fold_scale) {
    const VecF factor = VecF::broadcast(score_scale);
    for (int64_t c = 0; c < live; c += W) {
      const VecF x = VecF::load(s_row + c) * factor;
      x.store(s_row + c);
      tile_max = simd::max(tile_max, x);
    }
  } else {
    for (int64_t c = 0; c < live; c += W) tile_max = simd::max(tile_max, VecF::load(s_row + c));
  }
  const float unapplied_scale = fold_scale ? score_scale : 1.0f;  // > 0
  const float alpha = advance_row_max(tile_max, unapplied_scale, row_max);
  VecF sum = VecF::zero();
  if constexpr (kPRoundedToBf16) {  // p = 2^(score scale log2(e) - max log2(e))
    const VecF factor = VecF::broadcast(unapplied_scale * kLog2e), shift = VecF::broadcast(-*row_max * kLog2e);
    for (int64_t c = 0; c < live; c += W) {
      const VecF p = simd::exp2_softmax(simd::fma(VecF::load(s_row + c), factor, shift));
      if constexpr (kWriteBf16)
        attention_tiles::store_bf16_rounded<attention_tiles::kNativeBf16Build>(p, p_bf16 + c);
      else
        p.store(s_row + c);
      sum += p;
    }
  } else {
    const VecF shift = VecF::broadcast(*row_max);
    for (int64_t c = 0; c < live; c += W) {
      const VecF p = simd::exp_unclamped(VecF::load(s_row + c) - shift);
      p.store(s_row + c);
      sum += p;
    }
  }
  for (int64_t c = live; c < length; c += W) {
    if constexpr (kWriteBf16)
      VecF::zero().store_bf16(p_bf16 + c);
    else
      VecF::zero().store(s_row + c);
  }
  add_row_sum(sum_lanes, sum, alpha);
  rescale_accumulator(acc_row, acc_length, alpha);
}

// The backward's per-key math for one query row, W keys at a time: from the score (times
// score_scale, 1: already scaled) and dp = do . v, p = exp(score' - lse) and ds = p * (dp - delta),
// times (1 - tanh^2) with a soft cap (score' = softcap tanh(score / softcap)). kPRoundedToBf16 (P
// and dS rounded to bf16 for their products) takes p from simd::exp2_softmax, the score's scale
// folded into its argument where there is no cap.
template <bool kPRoundedToBf16>
struct GradientLanes {
  VecF cap, inverse_cap, factor, row_lse, row_delta, exp_factor, exp_shift;
  bool scale_first, capped;
  GradientLanes(float score_scale, float softcap, float lse, float delta)
      : cap(VecF::broadcast(softcap)),
        inverse_cap(VecF::broadcast(softcap > 0 ? 1.0f / softcap : 0.0f)),
        factor(VecF::broadcast(score_scale)),
        row_lse(VecF::broadcast(lse)),
        row_delta(VecF::broadcast(delta)),
        exp_factor(VecF::broadcast(kLog2e * (softcap > 0 ? 1.0f : score_scale))),
        exp_shift(VecF::broadcast(-lse * kLog2e)),
        scale_first(score_scale != 1.0f && (softcap > 0 || !kPRoundedToBf16)),
        capped(softcap > 0) {}
  [[gnu::always_inline]] void operator()(VecF score, VecF dp, VecF* p_out, VecF* ds_out) const {
    if (scale_first) score = score * factor;
    VecF t = VecF::zero();
    if (capped) {
      t = accurate_tanh(score * inverse_cap);
      score = cap * t;
    }
    VecF p;
    if constexpr (kPRoundedToBf16)
      p = simd::exp2_softmax(simd::fma(score, exp_factor, exp_shift));
    else
      p = simd::exp_unclamped(score - row_lse);
    VecF grad = p * (dp - row_delta);
    if (capped) grad = simd::fnma(grad * t, t, grad);  // * (1 - t^2)
    *p_out = p, *ds_out = grad;
  }
};

// One row of the backward's blocks (length a multiple of W): s_row holds scores and becomes p,
// ds_row holds dp and becomes ds (GradientLanes); both 0 outside [c_begin, c_end). As in the
// forward, vectors past the one holding key c_end - 1 are stored as zeros without being read.
template <bool kPRoundedToBf16 = false>
inline void gradient_block_row(float* s_row, float* ds_row, int64_t length, int64_t c_begin, int64_t c_end,
                               float score_scale, float softcap, float lse, float delta) {
  if (c_end <= c_begin) {
    std::memset(s_row, 0, sizeof(float) * length);
    std::memset(ds_row, 0, sizeof(float) * length);
    return;
  }
  const GradientLanes<kPRoundedToBf16> lanes(score_scale, softcap, lse, delta);
  const int64_t live = std::min(length, round_up(c_end, W));
  for (int64_t c = 0; c < live; c += W) {
    VecF p, grad;
    lanes(VecF::load(s_row + c), VecF::load(ds_row + c), &p, &grad);
    p.store(s_row + c);
    grad.store(ds_row + c);
  }
  for (int64_t c = 0; c < c_begin; ++c) s_row[c] = 0.0f, ds_row[c] = 0.0f;
  for (int64_t c = c_end; c < live; ++c) s_row[c] = 0.0f, ds_row[c] = 0.0f;
  for (int64_t c = live; c < length; c += W) VecF::zero().store(s_row + c), VecF::zero().store(ds_row + c);
}

// The forward's tensors as typed pointers (Element: float, or uint16_t for bf16 bits).
template <class Element>
struct ForwardOperands {
  const Element *q, *k, *v;
  Element* o;
  float* lse;
  explicit ForwardOperands(const FlashAttentionArgs& args)
      : q(static_cast<const Element*>(args.q.data)),
        k(static_cast<const Element*>(args.k.data)),
        v(static_cast<const Element*>(args.v.data)),
        o(static_cast<Element*>(args.o.data)),
        lse(args.lse.ptr<float>()) {}
};

// The backward's tensors as typed pointers (Element: float, or uint16_t for bf16 bits).
template <class Element>
struct BackwardOperands {
  const Element *q, *k, *v, *o, *d_o;
  const float* lse;
  Element *dq, *dk, *dv;
  explicit BackwardOperands(const FlashAttentionBackwardArgs& args)
      : q(static_cast<const Element*>(args.q.data)),
        k(static_cast<const Element*>(args.k.data)),
        v(static_cast<const Element*>(args.v.data)),
        o(static_cast<const Element*>(args.o.data)),
        d_o(static_cast<const Element*>(args.d_o.data)),
        lse(args.lse.ptr<float>()),
        dq(static_cast<Element*>(args.dq.data)),
        dk(static_cast<Element*>(args.dk.data)),
        dv(static_cast<Element*>(args.dv.data)) {}
};

// Rows [i0, i0 + rows) of head h of batch entry b: o = acc / sum (0 for a row that saw no key),
// lse = max + log(sum) (-inf for such a row), sum the row's lanes in `stats` added. acc: rows x ld
// floats.
template <class Element>
void store_output_rows(const Geometry& g, const float* acc, int64_t ld, const RowStats& stats, int64_t b, int64_t h,
                       int64_t i0, int64_t rows, Element* o, float* lse) {
  for (int64_t r = 0; r < rows; ++r) {
    Element* o_row = o + ((b * g.seq_q + i0 + r) * g.n_heads + h) * g.v_head_dim;
    const float sum = VecF::load(stats.row_sum(r)).reduce_add();
    const bool empty = sum == 0.0f;
    const VecF factor = VecF::broadcast(empty ? 0.0f : 1.0f / sum);
    for (int64_t d = 0; d < g.v_head_dim; d += W)
      store_lanes(VecF::load(acc + r * ld + d) * factor, o_row + d, g.v_head_dim - d);
    lse[(b * g.n_heads + h) * g.seq_q + i0 + r] = empty ? -INFINITY : stats.max[r] + std::log(sum);
  }
}

// delta[(b, h, i)] = do[b, i, h] . o[b, i, h] in f32, for every query row.
template <class Element>
void output_gradient_dots(const Geometry& g, const Element* d_o, const Element* o, float* delta) {
  const int64_t query_rows = g.batch * g.n_heads * g.seq_q;
  parallel_for(query_rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {  // row = (b * seq_q + i) * n_heads + h
      const int64_t h = row % g.n_heads, bi = row / g.n_heads, b = bi / g.seq_q, i = bi % g.seq_q;
      const Element *d_o_row = d_o + row * g.v_head_dim, *o_row = o + row * g.v_head_dim;
      int64_t d = 0;
      VecF lanes = VecF::zero();  // whole vectors, then the tail
      if constexpr (std::is_same_v<Element, float>) {
        for (; d + W <= g.v_head_dim; d += W) lanes = simd::fma(VecF::load(d_o_row + d), VecF::load(o_row + d), lanes);
      } else {  // bf16 bits (element by element, this was 5% of the AMX backward's vector work)
        for (; d + W <= g.v_head_dim; d += W)
          lanes = simd::fma(VecF::load_bf16(d_o_row + d), VecF::load_bf16(o_row + d), lanes);
      }
      float sum = lanes.reduce_add();
      for (; d < g.v_head_dim; ++d) sum += to_float(d_o_row[d]) * to_float(o_row[d]);
      delta[(b * g.n_heads + h) * g.seq_q + i] = sum;
    }
  });
}

// The dQ partials of a backward whose tasks are (batch, kv head) pairs x key blocks, pair-major,
// handed out as contiguous ranges: range s < slots (slots = num_threads() when the kernel starts)
// adds dS K into partial s. Range s touches only the pairs its tasks belong to, so partial s holds
// just those pairs' rows (a pair: its group's heads x rows_per_head rows x width floats); a pair
// whose key blocks two ranges share has a row in both, summed in range order. The partials come
// to about one f32 dQ (plus a pair per range boundary) where they were one whole dQ per thread:
// zeroing and summing those had been 10-14% of the AMX backward's vector work at T 2048, 8 heads,
// 2 threads, and grows with the thread count. The sums depend on `slots`, never on how many
// threads ran the ranges (run_ranges).
class DqPartials {
 public:
  DqPartials(const Geometry& g, int slots, int64_t rows_per_head, int64_t width)
      : g_(g),
        slots_(slots),
        pairs_(g.batch * g.n_kv_heads),
        rows_per_head_(rows_per_head),
        width_(width),
        pair_floats_(g.group * rows_per_head * width),
        index_(sizeof(int64_t) * static_cast<size_t>(3 * slots + 1 + pairs_)) {
    // index_: first_pair, end_pair and offset per range (offset one longer), first_range per pair.
    first_pair_ = index_.as<int64_t>(), end_pair_ = first_pair_ + slots, offset_ = end_pair_ + slots;
    first_range_ = offset_ + slots + 1;
    for (int64_t pair = 0; pair < pairs_; ++pair) first_range_[pair] = -1;
    int64_t offset = 0;
    for (int s = 0; s < slots; ++s) {
      int64_t begin, end;
      tasks(s, &begin, &end);
      first_pair_[s] = begin / std::max<int64_t>(1, g.key_blocks);
      end_pair_[s] = end > begin ? (end - 1) / g.key_blocks + 1 : first_pair_[s];
      for (int64_t pair = first_pair_[s]; pair < end_pair_[s]; ++pair)
        if (first_range_[pair] < 0) first_range_[pair] = s;
      offset_[s] = offset;
      offset += (end_pair_[s] - first_pair_[s]) * pair_floats_;
    }
    offset_[slots] = offset;
  }
  DqPartials(const DqPartials&) = delete;
  DqPartials& operator=(const DqPartials&) = delete;
  int64_t floats() const { return offset_[slots_]; }  // of the storage handed to bind()
  void bind(float* storage) { storage_ = storage; }

  // Inside parallel_run: thread `thread` of thread_count runs ranges thread, thread + thread_count,
  // ... (a nested call, one thread, runs them all): each range's partial zeroed, then
  // fn(range, pair, key_block) for its tasks in order, the key blocks of a pair in zigzag order
  // (long and short causal blocks alternate).
  template <class Fn>
  void run_ranges(int thread, int thread_count, Fn&& fn) const {
    for (int range = thread; range < slots_; range += thread_count) {
      zero(range);
      int64_t begin, end;
      tasks(range, &begin, &end);
      for (int64_t task = begin; task < end; ++task)
        fn(range, task / g_.key_blocks, attention_tiles::zigzag(task % g_.key_blocks, g_.key_blocks));
    }
  }
  // Row (group head hi, i) of pair `pair` in partial s is at pair_rows(s, pair) + (hi * rows_per_head + i) * width.
  float* pair_rows(int s, int64_t pair) const { return storage_ + offset_[s] + (pair - first_pair_[s]) * pair_floats_; }

  // dq[b, i, h] = scale * the sum over the ranges touching pair (b, h / group), in range order, of
  // row (h % group, i) of their partials, d < head_dim (width: the partials' padded head_dim, a
  // multiple of W); zero where no range touches the pair (no keys).
  template <class Element>
  void sum(Element* dq) const {
    const Geometry& g = g_;
    const VecF scale = VecF::broadcast(g.scale);
    parallel_for(g.batch * g.n_heads * g.seq_q, 64, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {  // row = (b * seq_q + i) * n_heads + h
        const int64_t h = row % g.n_heads, bi = row / g.n_heads, b = bi / g.seq_q, i = bi % g.seq_q;
        const int64_t pair = b * g.n_kv_heads + h / g.group, within = ((h % g.group) * rows_per_head_ + i) * width_;
        const int64_t first = first_range_[pair];
        for (int64_t d = 0; d < g.head_dim; d += W) {
          VecF sum = VecF::zero();
          if (first >= 0) {
            sum = VecF::load(pair_rows(static_cast<int>(first), pair) + within + d);
            for (int s = static_cast<int>(first) + 1; s < slots_ && touches(s, pair); ++s)
              sum += VecF::load(pair_rows(s, pair) + within + d);
          }
          store_lanes(sum * scale, dq + row * g.head_dim + d, g.head_dim - d);
        }
      }
    });
  }

 private:
  // Range s's tasks: [*begin, *end) of pairs x key_blocks.
  void tasks(int s, int64_t* begin, int64_t* end) const {
    const int64_t total = pairs_ * g_.key_blocks;
    *begin = total * s / slots_, *end = total * (s + 1) / slots_;
  }
  void zero(int s) const {
    std::memset(storage_ + offset_[s], 0, sizeof(float) * static_cast<size_t>(offset_[s + 1] - offset_[s]));
  }
  bool touches(int s, int64_t pair) const { return first_pair_[s] <= pair && pair < end_pair_[s]; }

  Geometry g_;
  int slots_;
  int64_t pairs_, rows_per_head_, width_, pair_floats_;
  AlignedBuffer index_;  // not std::vector: no std template instantiated in a per-ISA object (isa_symbol_check)
  int64_t *first_pair_, *end_pair_, *offset_;  // per range: its pairs [first, end), its partial's offset
  int64_t* first_range_;                       // per pair: the first range touching it (-1: none)
  float* storage_ = nullptr;
};

}  // namespace lathe::LATHE_ISA_NS::attention_blocks
