// The CUDA kernels of moe_router and moe_router_backward, one GPU thread per token: the work of one
// token as LATHE_HOST_DEVICE functions, launched by moe_router_cuda.cu and run on the host, token
// by token, by the "cuda_emulated" implementation (ops/cuda_emulated_impl.h), so the kernels'
// logic is tested on every machine. f32 throughout, in the reference's order of operations
// (moe_router.h); the top-k is k scans of the row for the best unchosen expert (experts <= 1024,
// a bit mask of the chosen), group scores k' scans of each group.
#pragma once

#include <math.h>

#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/ops/moe_router/moe_router.h"

namespace lathe::moe_router_cuda {

inline constexpr int64_t kMaxExperts = 1024, kMaxGroups = 64, kMaxTopK = 64;
inline constexpr int kMaskWords = kMaxExperts / 32;

struct Forward {
  const float* logits;  // (tokens, experts)
  const float* bias;    // (experts) or null
  float* probs;         // (tokens, experts)
  int32_t* ids;         // (tokens, top_k)
  float* weights;       // (tokens, top_k)
  int64_t experts, top_k, n_groups, topk_group, group_score_experts;
  bool sigmoid, renormalize;
  float scaling;
};

struct Backward {
  const float* probs;      // (tokens, experts)
  const int32_t* ids;      // (tokens, top_k)
  const float* d_weights;  // (tokens, top_k)
  const float* d_probs;    // (tokens, experts) or null
  float* d_logits;         // (tokens, experts)
  int64_t experts, top_k;
  bool sigmoid, renormalize;
  float scaling;
};

// NaN orders as -inf (the reference's sort key).
LATHE_HOST_DEVICE inline float sort_key(float value) { return value != value ? -INFINITY : value; }

LATHE_HOST_DEVICE inline bool marked(const uint32_t* mask, int64_t i) { return (mask[i / 32] >> (i % 32)) & 1u; }
LATHE_HOST_DEVICE inline void mark(uint32_t* mask, int64_t i) { mask[i / 32] |= 1u << (i % 32); }

// The best unmarked index of score(i), i in [begin, end): the highest key, equal keys the lowest
// index; -1 when every index is marked. Marks it.
template <class Score>
LATHE_HOST_DEVICE inline int64_t take_best(uint32_t* mask, int64_t begin, int64_t end, const Score& score) {
  int64_t best = -1;
  float best_key = 0.0f;
  for (int64_t i = begin; i < end; ++i) {
    if (marked(mask, i)) continue;
    const float key = sort_key(score(i));
    if (best < 0 || key > best_key) best = i, best_key = key;
  }
  if (best >= 0) mark(mask, best);
  return best;
}

LATHE_HOST_DEVICE inline void forward_token(const Forward& a, int64_t t) {
  const float* l = a.logits + t * a.experts;
  float* p = a.probs + t * a.experts;
  if (!a.sigmoid) {
    float max_logit = l[0];
    for (int64_t e = 1; e < a.experts; ++e) max_logit = l[e] > max_logit ? l[e] : max_logit;
    float sum = 0.0f;
    for (int64_t e = 0; e < a.experts; ++e) sum += (p[e] = expf(l[e] - max_logit));
    for (int64_t e = 0; e < a.experts; ++e) p[e] /= sum;
  } else {
    for (int64_t e = 0; e < a.experts; ++e) p[e] = 1.0f / (1.0f + expf(-l[e]));
  }
  auto score = [&](int64_t e) { return a.bias ? p[e] + a.bias[e] : p[e]; };

  // Group-limited routing: every expert of a dropped group is marked chosen before the top-k.
  uint32_t chosen[kMaskWords] = {};
  if (a.n_groups > 1) {
    const int64_t group_size = a.experts / a.n_groups;
    float group_score[kMaxGroups];
    for (int64_t g = 0; g < a.n_groups; ++g) {
      uint32_t taken[kMaskWords] = {};
      float sum = 0.0f;
      for (int64_t i = 0; i < a.group_score_experts; ++i)
        sum += score(take_best(taken, g * group_size, (g + 1) * group_size, score));
      group_score[g] = sum;
    }
    uint32_t kept[kMaxGroups / 32] = {};
    for (int64_t i = 0; i < a.topk_group; ++i)
      take_best(kept, 0, a.n_groups, [&](int64_t g) { return group_score[g]; });
    for (int64_t g = 0; g < a.n_groups; ++g)
      if (!marked(kept, g))
        for (int64_t e = g * group_size; e < (g + 1) * group_size; ++e) mark(chosen, e);
  }
  int32_t* ids = a.ids + t * a.top_k;
  float chosen_sum = 0.0f;
  for (int64_t j = 0; j < a.top_k; ++j) {
    const int64_t e = take_best(chosen, 0, a.experts, score);
    ids[j] = static_cast<int32_t>(e);
    chosen_sum += p[e];
  }
  float* w = a.weights + t * a.top_k;
  for (int64_t j = 0; j < a.top_k; ++j) w[j] = a.scaling * p[ids[j]] / (a.renormalize ? chosen_sum : 1.0f);
}

LATHE_HOST_DEVICE inline void backward_token(const Backward& a, int64_t t) {
  const float* p = a.probs + t * a.experts;
  const int32_t* ids = a.ids + t * a.top_k;
  const float* dw = a.d_weights + t * a.top_k;
  // c[j]: the gradient reaching p[ids[j]] through weights[j] (renormalisation and scaling).
  float c[kMaxTopK];
  if (a.renormalize) {
    float chosen_sum = 0.0f, weighted = 0.0f;
    for (int64_t j = 0; j < a.top_k; ++j) chosen_sum += p[ids[j]];
    for (int64_t j = 0; j < a.top_k; ++j) weighted += dw[j] * p[ids[j]] / chosen_sum;
    for (int64_t j = 0; j < a.top_k; ++j) c[j] = a.scaling / chosen_sum * (dw[j] - weighted);
  } else {
    for (int64_t j = 0; j < a.top_k; ++j) c[j] = a.scaling * dw[j];
  }
  auto dp = [&](int64_t e) {
    float value = a.d_probs ? a.d_probs[t * a.experts + e] : 0.0f;
    for (int64_t j = 0; j < a.top_k; ++j)
      if (ids[j] == e) value += c[j];
    return value;
  };
  float* dl = a.d_logits + t * a.experts;
  if (!a.sigmoid) {
    float dot = 0.0f;
    for (int64_t e = 0; e < a.experts; ++e) dot += p[e] * dp(e);
    for (int64_t e = 0; e < a.experts; ++e) dl[e] = p[e] * (dp(e) - dot);
  } else {
    for (int64_t e = 0; e < a.experts; ++e) dl[e] = dp(e) * p[e] * (1.0f - p[e]);
  }
}

// ---- host side: the arguments as the kernels' pointers, and what the kernels take ----

inline bool supported(int64_t experts, const MoeRouterOptions& options) {
  return experts <= kMaxExperts && options.n_groups <= kMaxGroups && options.top_k <= kMaxTopK;
}

inline Forward forward_of(const MoeRouterArgs& args) {
  const MoeRouterOptions& o = args.options;
  return {static_cast<const float*>(args.logits.data),
          static_cast<const float*>(args.selection_bias.data),
          static_cast<float*>(args.probs.data),
          static_cast<int32_t*>(args.expert_ids.data),
          static_cast<float*>(args.weights.data),
          args.logits.dim(1),
          o.top_k,
          o.n_groups,
          o.topk_group,
          o.group_score_experts,
          o.scoring == RouterScoring::sigmoid,
          o.renormalize,
          o.scaling};
}

inline Backward backward_of(const MoeRouterBackwardArgs& args) {
  const MoeRouterOptions& o = args.options;
  return {static_cast<const float*>(args.probs.data),
          static_cast<const int32_t*>(args.expert_ids.data),
          static_cast<const float*>(args.d_weights.data),
          static_cast<const float*>(args.d_probs.data),
          static_cast<float*>(args.d_logits.data),
          args.probs.dim(1),
          o.top_k,
          o.scoring == RouterScoring::sigmoid,
          o.renormalize,
          o.scaling};
}

}  // namespace lathe::moe_router_cuda
