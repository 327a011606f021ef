// MoE router-loss CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// Tokens split into fixed chunks of tokens_per_chunk (never by thread count); parallel_for runs
// the chunks. The losses keep one partial per chunk and add the partials in chunk order in
// double, so their bits depend on the config, not on the thread count. Counting experts is
// integer work (exact in any order); the backwards write each row from that row alone.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/moe_losses/moe_losses.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::load_row;
using simd::store_row;
using simd::VecF;
constexpr int W = VecF::width;
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

// Rows of probabilities summed in float before the sum moves to double: short float runs keep
// the column sums accurate to a few ulp whatever the chunk size.
constexpr int64_t kFloatRunRows = 32;
// The least work one parallel task gets (elements of probs or logits, or ids): below it, waking
// a second thread costs more than it saves, so small calls run on the calling thread. It sets
// only which thread runs which chunk, never the chunks, so results are unchanged by it.
constexpr int64_t kMinTaskElements = 32768;
constexpr int64_t kMinTaskIds = 65536;
// Rows whose max and exp-sum are computed before their logs: the libm call then sits outside the
// vector loop (which otherwise spills and reloads its exp constants around every call).
constexpr int64_t kLogRows = 16;
// Interleaved sub-histograms: a run of ids of one hot expert then spreads its increments over
// four counters instead of chaining each through the store-to-load latency of one.
constexpr int64_t kSubHistograms = 4;

struct Chunking {
  int64_t size, count;
  Chunking(int64_t tokens, int64_t tokens_per_chunk)
      : size(std::max<int64_t>(tokens_per_chunk, 1)), count((tokens + size - 1) / size) {}
  // parallel_for's grain over chunks so a task holds at least `minimum` units at `per_token` each.
  int64_t grain(int64_t per_token, int64_t minimum) const {
    return std::max<int64_t>(1, minimum / std::max<int64_t>(1, size * per_token));
  }
  int64_t begin(int64_t chunk) const { return chunk * size; }
  int64_t end(int64_t chunk, int64_t tokens) const { return std::min(tokens, (chunk + 1) * size); }
};

// counts[e] = number of ids == e among rows [begin, end) of ids (tokens, top_k); `scratch` holds
// kSubHistograms * experts int64.
void count_rows(const int32_t* ids, int64_t begin, int64_t end, int64_t top_k, int64_t experts, int64_t* scratch,
                int64_t* counts) {
  std::memset(scratch, 0, sizeof(int64_t) * kSubHistograms * experts);
  const int32_t* first = ids + begin * top_k;
  const int64_t n = (end - begin) * top_k;
  int64_t i = 0;
  for (; i + kSubHistograms <= n; i += kSubHistograms)
    for (int64_t h = 0; h < kSubHistograms; ++h) ++scratch[h * experts + first[i + h]];
  for (; i < n; ++i) ++scratch[first[i]];
  for (int64_t e = 0; e < experts; ++e) {
    int64_t sum = 0;
    for (int64_t h = 0; h < kSubHistograms; ++h) sum += scratch[h * experts + e];
    counts[e] = sum;
  }
}

// Every expert's count over all tokens, from per-chunk counts (chunks x experts) counted in parallel.
void count_experts(const TensorView& expert_ids, int64_t experts, int64_t tokens_per_chunk, int64_t* counts) {
  const int64_t tokens = expert_ids.dim(0), top_k = expert_ids.dim(1);
  const int32_t* ids = static_cast<const int32_t*>(expert_ids.data);
  const Chunking chunking(tokens, tokens_per_chunk);
  AlignedBuffer partial_buffer(sizeof(int64_t) * std::max<int64_t>(chunking.count, 1) * experts);
  int64_t* partials = partial_buffer.as<int64_t>();
  parallel_for(chunking.count, chunking.grain(top_k, kMinTaskIds), [&](int64_t chunk_begin, int64_t chunk_end) {
    AlignedBuffer scratch(sizeof(int64_t) * kSubHistograms * experts);
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk)
      count_rows(ids, chunking.begin(chunk), chunking.end(chunk, tokens), top_k, experts, scratch.as<int64_t>(),
                 partials + chunk * experts);
  });
  for (int64_t e = 0; e < experts; ++e) counts[e] = 0;
  for (int64_t chunk = 0; chunk < chunking.count; ++chunk)
    for (int64_t e = 0; e < experts; ++e) counts[e] += partials[chunk * experts + e];
}

// sums[e] += sum over rows [begin, end) of x[r, e], for x (rows, experts): float vector sums over
// at most kFloatRunRows rows, four vectors of columns at a time, added into double.
void add_column_sums(const float* x, int64_t begin, int64_t end, int64_t experts, double* sums) {
  alignas(64) float lanes[4 * W];
  for (int64_t run = begin; run < end; run += kFloatRunRows) {
    const int64_t run_end = std::min(end, run + kFloatRunRows);
    int64_t e = 0;
    for (; e + 4 * W <= experts; e += 4 * W) {
      VecF a0 = VecF::zero(), a1 = VecF::zero(), a2 = VecF::zero(), a3 = VecF::zero();
      for (int64_t r = run; r < run_end; ++r) {
        const float* row = x + r * experts + e;
        a0 += VecF::load(row);
        a1 += VecF::load(row + W);
        a2 += VecF::load(row + 2 * W);
        a3 += VecF::load(row + 3 * W);
      }
      a0.store(lanes);
      a1.store(lanes + W);
      a2.store(lanes + 2 * W);
      a3.store(lanes + 3 * W);
      for (int i = 0; i < 4 * W; ++i) sums[e + i] += lanes[i];
    }
    for (; e < experts; e += W) {
      const int64_t n = std::min<int64_t>(W, experts - e);
      VecF a = VecF::zero();
      for (int64_t r = run; r < run_end; ++r) a += load_row(x + r * experts + e, n);
      a.store(lanes);
      for (int64_t i = 0; i < n; ++i) sums[e + i] += lanes[i];
    }
  }
}

// A row of logits, read in vectors of W with one masked tail of `tail` lanes (0: none). The
// masks are built once per call, so a row whose experts are not a multiple of W (Mixtral's 8 on
// AVX-512) costs two register ops more, not a trip through memory.
struct LogitRow {
  int64_t experts, full, tail;  // full = experts rounded down to W
  VecF tail_fill;               // 0 in the tail's lanes, -inf beyond: a zero-filled load + it = -inf there
  VecF tail_keep;               // 1 in the tail's lanes, 0 beyond
  explicit LogitRow(int64_t experts_) : experts(experts_), full(experts_ / W * W), tail(experts_ - full) {
    alignas(64) float fill[W], keep[W];
    for (int i = 0; i < W; ++i) {
      fill[i] = i < tail ? 0.0f : kNegativeInfinity;
      keep[i] = i < tail ? 1.0f : 0.0f;
    }
    tail_fill = VecF::load(fill);
    tail_keep = VecF::load(keep);
  }

  float max(const float* x) const {
    VecF acc = VecF::broadcast(kNegativeInfinity);
    for (int64_t e = 0; e < full; e += W) acc = simd::max(acc, VecF::load(x + e));
    if (tail) acc = simd::max(acc, VecF::load_partial(x + full, static_cast<int>(tail)) + tail_fill);
    return acc.reduce_max();
  }

  // Sum of exp(x - max) over the row, also written to `exps` when it is not null. x - max is
  // floored at -100, where exp is exactly 0, so a -inf logit gives 0 (the vector exp returns NaN
  // for -inf); the floor is max's first operand, so a NaN stays NaN. Tail lanes beyond the row
  // are multiplied by 0 (exp saturates below inf, so they give exactly 0).
  float exp_sum(const float* x, float max_value, float* exps) const {
    const VecF shift = VecF::broadcast(max_value), floor = VecF::broadcast(-100.0f);
    VecF sum0 = VecF::zero(), sum1 = VecF::zero();
    int64_t e = 0;
    for (; e + 2 * W <= full; e += 2 * W) {
      VecF p0 = simd::exp(simd::max(floor, VecF::load(x + e) - shift));
      VecF p1 = simd::exp(simd::max(floor, VecF::load(x + e + W) - shift));
      if (exps) {
        p0.store(exps + e);
        p1.store(exps + e + W);
      }
      sum0 += p0;
      sum1 += p1;
    }
    for (; e < full; e += W) {
      VecF p = simd::exp(simd::max(floor, VecF::load(x + e) - shift));
      if (exps) p.store(exps + e);
      sum0 += p;
    }
    if (tail) {
      VecF p = simd::exp(simd::max(floor, VecF::load_partial(x + full, static_cast<int>(tail)) - shift)) * tail_keep;
      if (exps) p.store_partial(exps + full, static_cast<int>(tail));
      sum1 += p;
    }
    return (sum0 + sum1).reduce_add();
  }
};

}  // namespace

void moe_load_balancing_loss_kernel(const MoeLoadBalancingLossArgs& args, const MoeLossesCpuConfig& config) {
  const int64_t tokens = args.probs.dim(0), experts = args.probs.dim(1), top_k = args.expert_ids.dim(1);
  const float* probs = static_cast<const float*>(args.probs.data);
  const int32_t* ids = static_cast<const int32_t*>(args.expert_ids.data);
  const Chunking chunking(tokens, config.tokens_per_chunk);
  const int64_t chunks = std::max<int64_t>(chunking.count, 1);
  // Per chunk: the expert counts and the column sums of probs, in one pass over the chunk.
  AlignedBuffer count_buffer(sizeof(int64_t) * chunks * experts);
  AlignedBuffer sum_buffer(sizeof(double) * chunks * experts, /*zeroed=*/true);
  int64_t* chunk_counts = count_buffer.as<int64_t>();
  double* chunk_sums = sum_buffer.as<double>();
  const int64_t grain = chunking.grain(experts + top_k, kMinTaskElements);
  parallel_for(chunking.count, grain, [&](int64_t chunk_begin, int64_t chunk_end) {
    AlignedBuffer scratch(sizeof(int64_t) * kSubHistograms * experts);
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      const int64_t begin = chunking.begin(chunk), end = chunking.end(chunk, tokens);
      count_rows(ids, begin, end, top_k, experts, scratch.as<int64_t>(), chunk_counts + chunk * experts);
      add_column_sums(probs, begin, end, experts, chunk_sums + chunk * experts);
    }
  });
  // loss = experts / tokens^2 * sum_e count_e * sum_t probs[t, e], chunks added in chunk order.
  double total = 0;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t count = 0;
    double probability_sum = 0;
    for (int64_t chunk = 0; chunk < chunking.count; ++chunk) {
      count += chunk_counts[chunk * experts + e];
      probability_sum += chunk_sums[chunk * experts + e];
    }
    total += static_cast<double>(count) * probability_sum;
  }
  const double token_count = static_cast<double>(tokens);
  *static_cast<float*>(args.loss.data) =
      tokens > 0 ? static_cast<float>(static_cast<double>(experts) * total / (token_count * token_count)) : 0.0f;
}

void moe_load_balancing_loss_backward_kernel(const MoeLoadBalancingLossBackwardArgs& args,
                                             const MoeLossesCpuConfig& config) {
  const int64_t tokens = args.d_probs.dim(0), experts = args.d_probs.dim(1);
  if (tokens == 0) return;
  AlignedBuffer count_buffer(sizeof(int64_t) * experts);
  count_experts(args.expert_ids, experts, config.tokens_per_chunk, count_buffer.as<int64_t>());
  // The gradient row, the same for every token, rounded once from double.
  AlignedBuffer row_buffer(sizeof(float) * experts);
  float* gradient_row = row_buffer.as<float>();
  const double token_count = static_cast<double>(tokens);
  const double scale = static_cast<double>(args.d_loss) * static_cast<double>(experts) / (token_count * token_count);
  for (int64_t e = 0; e < experts; ++e)
    gradient_row[e] = static_cast<float>(scale * static_cast<double>(count_buffer.as<int64_t>()[e]));
  float* d_probs = static_cast<float*>(args.d_probs.data);
  const bool accumulate = args.accumulate;
  const int64_t grain = std::max(config.tokens_per_chunk, kMinTaskElements / experts);
  parallel_for(tokens, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* row = d_probs + t * experts;
      for (int64_t e = 0; e < experts; e += W) {
        const int64_t n = experts - e;
        VecF g = load_row(gradient_row + e, n);
        store_row(row + e, accumulate ? load_row(row + e, n) + g : g, n);
      }
    }
  });
}

void moe_z_loss_kernel(const MoeZLossArgs& args, const MoeLossesCpuConfig& config) {
  const int64_t tokens = args.logits.dim(0), experts = args.logits.dim(1);
  const float* logits = static_cast<const float*>(args.logits.data);
  const Chunking chunking(tokens, config.tokens_per_chunk);
  const LogitRow logit_row(experts);
  AlignedBuffer partial_buffer(sizeof(double) * std::max<int64_t>(chunking.count, 1));
  double* partials = partial_buffer.as<double>();
  parallel_for(chunking.count, chunking.grain(experts, kMinTaskElements / 2),
               [&](int64_t chunk_begin, int64_t chunk_end) {
                 float maxes[kLogRows], exp_sums[kLogRows];
                 for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
                   double sum = 0;
                   const int64_t end = chunking.end(chunk, tokens);
                   for (int64_t block = chunking.begin(chunk); block < end; block += kLogRows) {
                     const int64_t rows = std::min(kLogRows, end - block);
                     for (int64_t i = 0; i < rows; ++i) {
                       const float* row = logits + (block + i) * experts;
                       maxes[i] = logit_row.max(row);
                       exp_sums[i] = logit_row.exp_sum(row, maxes[i], nullptr);
                     }
                     for (int64_t i = 0; i < rows; ++i) {
                       const double lse = static_cast<double>(maxes[i] + std::log(exp_sums[i]));
                       sum += lse * lse;
                     }
                   }
                   partials[chunk] = sum;
                 }
               });
  double total = 0;
  for (int64_t chunk = 0; chunk < chunking.count; ++chunk) total += partials[chunk];
  *static_cast<float*>(args.loss.data) = tokens > 0 ? static_cast<float>(total / static_cast<double>(tokens)) : 0.0f;
}

void moe_z_loss_backward_kernel(const MoeZLossBackwardArgs& args, const MoeLossesCpuConfig& config) {
  const int64_t tokens = args.logits.dim(0), experts = args.logits.dim(1);
  const float* logits = static_cast<const float*>(args.logits.data);
  float* d_logits = static_cast<float*>(args.d_logits.data);
  const bool accumulate = args.accumulate;
  const LogitRow logit_row(experts);
  const float two_d_loss_over_tokens =
      static_cast<float>(2.0 * args.d_loss / static_cast<double>(std::max<int64_t>(tokens, 1)));
  const int64_t grain = std::max(config.tokens_per_chunk, kMinTaskElements / 2 / experts);
  parallel_for(tokens, grain, [&](int64_t begin, int64_t end) {
    AlignedBuffer exp_buffer(sizeof(float) * kLogRows * experts);
    float* exps = exp_buffer.as<float>();
    float maxes[kLogRows], exp_sums[kLogRows];
    for (int64_t block = begin; block < end; block += kLogRows) {
      const int64_t rows = std::min(kLogRows, end - block);
      for (int64_t i = 0; i < rows; ++i) {
        const float* row = logits + (block + i) * experts;
        maxes[i] = logit_row.max(row);
        exp_sums[i] = logit_row.exp_sum(row, maxes[i], exps + i * experts);
      }
      for (int64_t i = 0; i < rows; ++i) {
        // d = (2 d_loss / tokens) * lse * exp(x - max) / exp_sum
        const float lse = maxes[i] + std::log(exp_sums[i]);
        exp_sums[i] = two_d_loss_over_tokens * lse / exp_sums[i];  // now the row's scale
      }
      for (int64_t i = 0; i < rows; ++i) {
        const VecF scale = VecF::broadcast(exp_sums[i]);
        const float* row_exps = exps + i * experts;
        float* out = d_logits + (block + i) * experts;
        for (int64_t e = 0; e < experts; e += W) {
          const int64_t n = experts - e;
          VecF g = load_row(row_exps + e, n) * scale;
          store_row(out + e, accumulate ? load_row(out + e, n) + g : g, n);
        }
      }
    }
  });
}

void moe_bias_update_kernel(const MoeBiasUpdateArgs& args, const MoeLossesCpuConfig& config) {
  const int64_t experts = args.bias.dim(0);
  const int64_t tokens = args.expert_ids.dim(0), top_k = args.expert_ids.dim(1);
  int64_t* counts = static_cast<int64_t*>(args.counts.data);
  count_experts(args.expert_ids, experts, config.tokens_per_chunk, counts);
  float* bias = static_cast<float*>(args.bias.data);
  const int64_t routed = tokens * top_k;
  for (int64_t e = 0; e < experts; ++e) {
    // sign(mean_count - count_e) with mean_count = routed / experts, compared exactly in integers.
    const int64_t excess = routed - experts * counts[e];
    if (excess > 0)
      bias[e] += args.rate;
    else if (excess < 0)
      bias[e] -= args.rate;
  }
}

}  // namespace lathe::LATHE_ISA_NS
