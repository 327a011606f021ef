// MoE router CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// One token row at a time, rows split statically across threads (each row by one thread, in a
// fixed order: results do not depend on the thread count).
// Forward: the probabilities vectorised (softmax: max, exp + sum, scale; or sigmoid), the
// selection scores (+ bias) in a scratch row, then the top k kept in a short sorted list that
// takes offers in increasing expert id; ties keep arrival order, so equal scores go to the lower
// id as the contract says. Offering every element costs a mispredicted branch on most of them,
// so select_top() first bounds the k-th best from below by stripe maxima and offers only the
// elements reaching the bound (config filter = 1); the plain scan (filter = 0, and the fallback)
// skips blocks of `skip_vectors` vectors whose max cannot beat the current k-th best.
// Group-limited routing scores each group with the same selection (capacity
// group_score_experts), keeps the best topk_group groups with another list, gathers the kept
// groups side by side (in id order) and selects the top k among them.
// Backward: d_p = d_probs + the sparse weight gradient in a scratch row, then the vectorised
// softmax or sigmoid Jacobian.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/moe_router/moe_router.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::load_row;
using simd::store_row;
using simd::VecF;
constexpr int W = VecF::width;
constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

// v with lanes n.. replaced by `fill`.
inline VecF fill_tail(VecF v, int64_t n, float fill) {
  if (n >= W) return v;
  alignas(64) float lanes[W];
  for (int i = 0; i < W; ++i) lanes[i] = fill;
  v.store_partial(lanes, static_cast<int>(n));
  return VecF::load(lanes);
}

void softmax_row(const float* logits, float* probs, int64_t experts) {
  VecF max0 = VecF::broadcast(kNegativeInfinity), max1 = max0;
  int64_t e = 0;
  for (; e + 2 * W <= experts; e += 2 * W) {
    max0 = simd::max(max0, VecF::load(logits + e));
    max1 = simd::max(max1, VecF::load(logits + e + W));
  }
  for (; e < experts; e += W)
    max0 = simd::max(max0, fill_tail(load_row(logits + e, experts - e), experts - e, kNegativeInfinity));
  const VecF shift = VecF::broadcast(simd::max(max0, max1).reduce_max());
  VecF sum0 = VecF::zero(), sum1 = VecF::zero();
  for (e = 0; e + 2 * W <= experts; e += 2 * W) {
    VecF a = simd::exp(VecF::load(logits + e) - shift), b = simd::exp(VecF::load(logits + e + W) - shift);
    a.store(probs + e);
    b.store(probs + e + W);
    sum0 += a;
    sum1 += b;
  }
  for (; e < experts; e += W) {
    const int64_t n = experts - e;
    VecF a = fill_tail(simd::exp(load_row(logits + e, n) - shift), n, 0.0f);
    store_row(probs + e, a, n);
    sum0 += a;
  }
  const VecF inverse_sum = VecF::broadcast(1.0f / (sum0 + sum1).reduce_add());
  for (e = 0; e < experts; e += W) store_row(probs + e, load_row(probs + e, experts - e) * inverse_sum, experts - e);
}

void sigmoid_row(const float* logits, float* probs, int64_t experts) {
  for (int64_t e = 0; e < experts; e += W)
    store_row(probs + e, simd::sigmoid(load_row(logits + e, experts - e)), experts - e);
}

// The best `capacity` (score, id) pairs offered so far, best first. An offer must beat the last
// kept score strictly, and is placed after every kept score it does not beat: offered in
// increasing id, equal scores stay in id order. Until full, every offer is kept (so the list
// always fills, whatever the scores, NaN included).
struct TopList {
  float* scores;
  int32_t* ids;
  int64_t capacity;
  int64_t count = 0;

  bool full() const { return count == capacity; }
  float last() const { return scores[capacity - 1]; }
  void offer(float score, int64_t id) {
    if (full()) {
      if (!(score > last())) return;
      --count;
    }
    int64_t position = count;
    for (; position > 0 && score > scores[position - 1]; --position) {
      scores[position] = scores[position - 1];
      ids[position] = ids[position - 1];
    }
    scores[position] = score;
    ids[position] = static_cast<int32_t>(id);
    ++count;
  }
};

// Offers scores[begin, end) in increasing id; blocks of `skip_vectors` vectors whose max cannot
// beat the last kept score (once the list is full) are skipped whole. Ids offered are id_offset + e.
void scan(const float* scores, int64_t begin, int64_t end, int64_t id_offset, int64_t skip_vectors, TopList& top) {
  int64_t e = begin;
  for (; e < end && !top.full(); ++e) top.offer(scores[e], id_offset + e);
  const int64_t block = W * skip_vectors;
  for (; e + block <= end; e += block) {
    VecF block_max = VecF::load(scores + e);
    for (int64_t v = 1; v < skip_vectors; ++v) block_max = simd::max(block_max, VecF::load(scores + e + v * W));
    if (!(block_max.reduce_max() > top.last())) continue;
    for (int64_t i = 0; i < block; ++i) top.offer(scores[e + i], id_offset + e + i);
  }
  for (; e < end; ++e) top.offer(scores[e], id_offset + e);
}

constexpr int kMaxStripeVectors = 4;

// The best top.capacity of scores[0, n) (ids id_offset + e), as scan() would choose them, but
// offering only the candidates that can win: split the row into `capacity` disjoint stripes (the
// lanes of a few vector accumulators, folded); each stripe's max is a distinct element, so at
// least `capacity` elements reach the smallest stripe max, and anything below it cannot be
// chosen. A branch-free pass gathers the elements >= that bound (ties with it included), in id
// order; typically ~2x capacity of them, where the scan mispredicts a branch on most elements.
// Falls back to the scan when the stripes do not fit or a NaN defeats the bound.
void select_top(const float* scores, int64_t n, int64_t id_offset, const MoeRouterCpuConfig& config,
                int32_t* candidates, TopList& top) {
  const int64_t k = top.capacity;
  const int64_t vectors = (k + W - 1) / W, chunk = vectors * W;
  if (config.filter == 0 || vectors > kMaxStripeVectors || n < 2 * chunk) {
    scan(scores, 0, n, id_offset, std::max<int64_t>(1, config.skip_vectors), top);
    return;
  }
  VecF stripe_max[kMaxStripeVectors];
  for (int64_t v = 0; v < vectors; ++v) stripe_max[v] = VecF::load(scores + v * W);
  int64_t e = chunk;
  for (; e + chunk <= n; e += chunk)
    for (int64_t v = 0; v < vectors; ++v) stripe_max[v] = simd::max(stripe_max[v], VecF::load(scores + e + v * W));
  alignas(64) float lanes[kMaxStripeVectors * W] = {};
  for (int64_t v = 0; v < vectors; ++v) stripe_max[v].store(lanes + v * W);
  // Fold the chunk lanes into k stripes (lane i joins stripe i mod k), then take their min.
  for (int64_t i = k; i < chunk; ++i) lanes[i % k] = std::max(lanes[i % k], lanes[i]);
  float bound = lanes[0];
  for (int64_t i = 1; i < k; ++i) bound = std::min(bound, lanes[i]);
  int64_t count = 0;
  for (e = 0; e < n; ++e) {
    candidates[count] = static_cast<int32_t>(e);
    count += scores[e] >= bound;
  }
  if (count < k) {  // only with NaN scores
    scan(scores, 0, n, id_offset, std::max<int64_t>(1, config.skip_vectors), top);
    return;
  }
  for (int64_t i = 0; i < count; ++i) top.offer(scores[candidates[i]], id_offset + candidates[i]);
}

void forward(const MoeRouterArgs& args, const MoeRouterCpuConfig& config) {
  const MoeRouterOptions& options = args.options;
  const int64_t tokens = args.logits.dim(0), experts = args.logits.dim(1), k = options.top_k;
  const int64_t groups = options.n_groups, group_size = experts / groups, group_k = options.group_score_experts;
  const float* logits = static_cast<const float*>(args.logits.data);
  const float* bias = static_cast<const float*>(args.selection_bias.data);
  float* probs = static_cast<float*>(args.probs.data);
  int32_t* expert_ids = static_cast<int32_t*>(args.expert_ids.data);
  float* weights = static_cast<float*>(args.weights.data);
  const bool softmax = options.scoring == RouterScoring::softmax;
  parallel_for(tokens, std::max<int64_t>(config.rows_per_task, 1), [&](int64_t begin, int64_t end) {
    // Scratch: the biased scores, the kept groups' scores gathered, the group scores, the
    // candidate ids, the top-k list and the group lists, the kept-group flags.
    const int64_t list_capacity = std::max(k, std::max(group_k, options.topk_group));
    const int64_t kept_experts = groups > 1 ? options.topk_group * group_size : 0;
    AlignedBuffer score_buffer(sizeof(float) * ((bias ? experts : 0) + kept_experts + groups));
    AlignedBuffer list_buffer((sizeof(float) + sizeof(int32_t)) * list_capacity * 2 + sizeof(int32_t) * (experts + 1) +
                              groups);
    float* biased = score_buffer.as<float>();
    float* gathered = biased + (bias ? experts : 0);
    float* group_scores = gathered + kept_experts;
    float* list_scores = list_buffer.as<float>();
    float* group_list_scores = list_scores + list_capacity;
    int32_t* list_ids = reinterpret_cast<int32_t*>(group_list_scores + list_capacity);
    int32_t* group_list_ids = list_ids + list_capacity;
    int32_t* candidates = group_list_ids + list_capacity;
    bool* kept = reinterpret_cast<bool*>(candidates + experts + 1);
    for (int64_t t = begin; t < end; ++t) {
      float* p = probs + t * experts;
      if (softmax)
        softmax_row(logits + t * experts, p, experts);
      else
        sigmoid_row(logits + t * experts, p, experts);
      const float* scores = p;
      if (bias) {
        for (int64_t e = 0; e < experts; e += W)
          store_row(biased + e, load_row(p + e, experts - e) + load_row(bias + e, experts - e), experts - e);
        scores = biased;
      }
      TopList top{list_scores, list_ids, k};
      if (groups > 1) {
        for (int64_t g = 0; g < groups; ++g) {
          TopList best{group_list_scores, group_list_ids, group_k};
          select_top(scores + g * group_size, group_size, 0, config, candidates, best);
          float sum = 0.0f;
          for (int64_t i = 0; i < group_k; ++i) sum += best.scores[i];  // best first, as the reference
          group_scores[g] = sum;
        }
        TopList best_groups{group_list_scores, group_list_ids, options.topk_group};
        for (int64_t g = 0; g < groups; ++g) best_groups.offer(group_scores[g], g);
        std::memset(kept, 0, static_cast<size_t>(groups));
        for (int64_t i = 0; i < options.topk_group; ++i) kept[best_groups.ids[i]] = true;
        // The kept groups side by side, in group order (so gathered order is id order), then the
        // top-k among them, mapped back to expert ids.
        int64_t slot = 0;
        for (int64_t g = 0; g < groups; ++g)
          if (kept[g]) {
            std::memcpy(gathered + slot * group_size, scores + g * group_size, sizeof(float) * group_size);
            group_list_ids[slot++] = static_cast<int32_t>(g);
          }
        select_top(gathered, kept_experts, 0, config, candidates, top);
        for (int64_t j = 0; j < k; ++j)
          top.ids[j] =
              static_cast<int32_t>(group_list_ids[top.ids[j] / group_size] * group_size + top.ids[j] % group_size);
      } else {
        select_top(scores, experts, 0, config, candidates, top);
      }
      float chosen_sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) chosen_sum += p[top.ids[j]];
      const float denominator = options.renormalize ? chosen_sum : 1.0f;
      for (int64_t j = 0; j < k; ++j) {
        expert_ids[t * k + j] = top.ids[j];
        weights[t * k + j] = options.scaling * p[top.ids[j]] / denominator;
      }
    }
  });
}

void backward(const MoeRouterBackwardArgs& args, const MoeRouterBackwardCpuConfig& config) {
  const MoeRouterOptions& options = args.options;
  const int64_t tokens = args.probs.dim(0), experts = args.probs.dim(1), k = options.top_k;
  const float* probs = static_cast<const float*>(args.probs.data);
  const int32_t* expert_ids = static_cast<const int32_t*>(args.expert_ids.data);
  const float* d_weights = static_cast<const float*>(args.d_weights.data);
  const float* d_probs = static_cast<const float*>(args.d_probs.data);
  float* d_logits = static_cast<float*>(args.d_logits.data);
  const bool softmax = options.scoring == RouterScoring::softmax;
  const float scaling = options.scaling;
  parallel_for(tokens, std::max<int64_t>(config.rows_per_task, 1), [&](int64_t begin, int64_t end) {
    AlignedBuffer dp_buffer(sizeof(float) * experts);
    float* dp = dp_buffer.as<float>();
    for (int64_t t = begin; t < end; ++t) {
      const float* p = probs + t * experts;
      const int32_t* ids = expert_ids + t * k;
      const float* dw = d_weights + t * k;
      if (d_probs)
        std::memcpy(dp, d_probs + t * experts, sizeof(float) * experts);
      else
        std::memset(dp, 0, sizeof(float) * experts);
      if (options.renormalize) {
        float chosen_sum = 0.0f, weighted = 0.0f;
        for (int64_t j = 0; j < k; ++j) chosen_sum += p[ids[j]];
        for (int64_t j = 0; j < k; ++j) weighted += dw[j] * p[ids[j]] / chosen_sum;
        for (int64_t j = 0; j < k; ++j) dp[ids[j]] += scaling / chosen_sum * (dw[j] - weighted);
      } else {
        for (int64_t j = 0; j < k; ++j) dp[ids[j]] += scaling * dw[j];
      }
      float* dl = d_logits + t * experts;
      if (softmax) {
        VecF dot0 = VecF::zero(), dot1 = VecF::zero();
        int64_t e = 0;
        for (; e + 2 * W <= experts; e += 2 * W) {
          dot0 = simd::fma(VecF::load(p + e), VecF::load(dp + e), dot0);
          dot1 = simd::fma(VecF::load(p + e + W), VecF::load(dp + e + W), dot1);
        }
        for (; e < experts; e += W) dot0 = simd::fma(load_row(p + e, experts - e), load_row(dp + e, experts - e), dot0);
        const VecF dot = VecF::broadcast((dot0 + dot1).reduce_add());
        for (e = 0; e < experts; e += W)
          store_row(dl + e, load_row(p + e, experts - e) * (load_row(dp + e, experts - e) - dot), experts - e);
      } else {
        const VecF one = VecF::broadcast(1.0f);
        for (int64_t e = 0; e < experts; e += W) {
          VecF pv = load_row(p + e, experts - e);
          store_row(dl + e, load_row(dp + e, experts - e) * pv * (one - pv), experts - e);
        }
      }
    }
  });
}

}  // namespace

void moe_router_forward_kernel(const MoeRouterArgs& args, const MoeRouterCpuConfig& config) { forward(args, config); }

void moe_router_backward_kernel(const MoeRouterBackwardArgs& args, const MoeRouterBackwardCpuConfig& config) {
  backward(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
