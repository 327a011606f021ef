#include "lathe/ops/moe_router/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "lathe/ops/cuda_emulated_impl.h"
#include "lathe/ops/moe_router/moe_router_cuda.h"
#include "lathe/ops/moe_router/moe_router_cuda_body.h"
#include "lathe/ops/validate.h"

namespace lathe {

LATHE_DECLARE_ISA_KERNEL(moe_router_forward_kernel, MoeRouterArgs, MoeRouterCpuConfig)
LATHE_DECLARE_ISA_KERNEL(moe_router_backward_kernel, MoeRouterBackwardArgs, MoeRouterBackwardCpuConfig)

const char* router_scoring_name(RouterScoring scoring) {
  return scoring == RouterScoring::sigmoid ? "sigmoid" : "softmax";
}

RouterScoring parse_router_scoring(const std::string& name) {
  if (name == "softmax") return RouterScoring::softmax;
  if (name == "sigmoid") return RouterScoring::sigmoid;
  throw_error("unknown router scoring '", name, "' (accepted: softmax, sigmoid)");
}

// ---- validation ----

static void validate_options(ArgChecker& check, const MoeRouterOptions& options, int64_t experts) {
  check.require(options.top_k >= 1 && options.top_k <= experts, "top_k must be in [1, experts = ", experts, "], got ",
                options.top_k);
  check.require(options.n_groups >= 1 && experts % options.n_groups == 0, "n_groups must divide experts = ", experts,
                ", got ", options.n_groups);
  const int64_t group_size = experts / options.n_groups;
  check.require(options.topk_group >= 1 && options.topk_group <= options.n_groups,
                "topk_group must be in [1, n_groups = ", options.n_groups, "], got ", options.topk_group);
  check.require(options.top_k <= options.topk_group * group_size, "top_k = ", options.top_k,
                " exceeds the experts of the kept groups (topk_group * experts / n_groups = ",
                options.topk_group * group_size, ")");
  // With one group there is no group score, so its size is not constrained (the default 2 with a
  // single expert stays valid).
  if (options.n_groups > 1)
    check.require(options.group_score_experts >= 1 && options.group_score_experts <= group_size,
                  "group_score_experts must be in [1, experts / n_groups = ", group_size, "], got ",
                  options.group_score_experts);
  check.require(std::isfinite(options.scaling) && options.scaling > 0, "scaling must be finite and positive, got ",
                options.scaling);
}

void validate(const MoeRouterArgs& args) {
  ArgChecker check("moe_router");
  check.rank("logits", args.logits, 2).dtype("logits", args.logits, DType::f32).contiguous("logits", args.logits);
  const int64_t tokens = args.logits.dim(0), experts = args.logits.dim(1);
  validate_options(check, args.options, experts);
  const int64_t k = args.options.top_k;
  if (args.selection_bias.data)
    check.shape("selection_bias", args.selection_bias, {experts})
        .dtype("selection_bias", args.selection_bias, DType::f32)
        .contiguous("selection_bias", args.selection_bias);
  check.shape("probs", args.probs, {tokens, experts}).dtype("probs", args.probs, DType::f32);
  check.shape("expert_ids", args.expert_ids, {tokens, k}).dtype("expert_ids", args.expert_ids, DType::i32);
  check.shape("weights", args.weights, {tokens, k}).dtype("weights", args.weights, DType::f32);
  check.contiguous("probs", args.probs).contiguous("expert_ids", args.expert_ids).contiguous("weights", args.weights);
}

void validate(const MoeRouterBackwardArgs& args) {
  ArgChecker check("moe_router_backward");
  check.rank("probs", args.probs, 2).dtype("probs", args.probs, DType::f32).contiguous("probs", args.probs);
  const int64_t tokens = args.probs.dim(0), experts = args.probs.dim(1);
  validate_options(check, args.options, experts);
  const int64_t k = args.options.top_k;
  check.shape("expert_ids", args.expert_ids, {tokens, k}).dtype("expert_ids", args.expert_ids, DType::i32);
  check.shape("d_weights", args.d_weights, {tokens, k}).dtype("d_weights", args.d_weights, DType::f32);
  if (args.d_probs.data)
    check.shape("d_probs", args.d_probs, {tokens, experts}).dtype("d_probs", args.d_probs, DType::f32);
  check.shape("d_logits", args.d_logits, {tokens, experts}).dtype("d_logits", args.d_logits, DType::f32);
  check.contiguous("expert_ids", args.expert_ids).contiguous("d_weights", args.d_weights);
  if (args.d_probs.data) check.contiguous("d_probs", args.d_probs);
  check.contiguous("d_logits", args.d_logits);
  // The kernel indexes rows by these ids: an out-of-range one is refused, never read past the row.
  Tensor host_copy;
  const int32_t* ids = static_cast<const int32_t*>(host_readable(args.expert_ids, host_copy).data);
  for (int64_t i = 0; i < tokens * k; ++i)
    check.require(ids[i] >= 0 && ids[i] < experts, "expert_ids[", i / k, ", ", i % k, "] = ", ids[i],
                  " is outside [0, experts = ", experts, ")");
}

// ---- reference ----

namespace {

// NaN sorts as -inf, so the comparisons below stay a strict weak order on any input.
template <class T>
T sort_key(T value) {
  return std::isnan(value) ? -std::numeric_limits<T>::infinity() : value;
}

// Indices [0, n) ordered by score descending, equal scores by index ascending.
template <class T>
std::vector<int64_t> order_by_score(const std::vector<T>& scores) {
  std::vector<int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    T key_a = sort_key(scores[a]), key_b = sort_key(scores[b]);
    return key_a > key_b || (key_a == key_b && a < b);
  });
  return order;
}

}  // namespace

template <class T>
void moe_router_reference(const MoeRouterArgs& args) {
  const MoeRouterOptions& options = args.options;
  const int64_t tokens = args.logits.dim(0), experts = args.logits.dim(1), k = options.top_k;
  const int64_t group_size = experts / options.n_groups;
  std::vector<T> logits = to_vector<T>(args.logits);
  std::vector<T> bias = args.selection_bias.data ? to_vector<T>(args.selection_bias) : std::vector<T>(experts, T(0));
  std::vector<T> probs(tokens * experts), weights(tokens * k);
  std::vector<double> ids(tokens * k);
  for (int64_t t = 0; t < tokens; ++t) {
    const T* l = logits.data() + t * experts;
    T* p = probs.data() + t * experts;
    if (options.scoring == RouterScoring::softmax) {
      T max_logit = *std::max_element(l, l + experts);
      T sum = 0;
      for (int64_t e = 0; e < experts; ++e) sum += (p[e] = std::exp(l[e] - max_logit));
      for (int64_t e = 0; e < experts; ++e) p[e] /= sum;
    } else {
      for (int64_t e = 0; e < experts; ++e) p[e] = T(1) / (T(1) + std::exp(-l[e]));
    }
    std::vector<T> score(experts);
    for (int64_t e = 0; e < experts; ++e) score[e] = p[e] + bias[e];

    std::vector<bool> selectable(experts, true);
    if (options.n_groups > 1) {
      std::vector<T> group_score(options.n_groups, T(0));
      for (int64_t g = 0; g < options.n_groups; ++g) {
        std::vector<T> members(score.begin() + g * group_size, score.begin() + (g + 1) * group_size);
        std::vector<int64_t> best = order_by_score(members);
        for (int64_t i = 0; i < options.group_score_experts; ++i) group_score[g] += members[best[i]];
      }
      std::vector<int64_t> group_order = order_by_score(group_score);
      for (int64_t rank = options.topk_group; rank < options.n_groups; ++rank)
        for (int64_t e = 0; e < group_size; ++e) selectable[group_order[rank] * group_size + e] = false;
    }
    for (int64_t e = 0; e < experts; ++e)
      if (!selectable[e]) score[e] = -std::numeric_limits<T>::infinity();
    // Unselectable experts sort last (after any -inf score of a selectable one, by index; never
    // reached, since top_k <= the selectable count).
    std::vector<int64_t> order = order_by_score(score);
    std::stable_partition(order.begin(), order.end(), [&](int64_t e) { return selectable[e]; });

    T chosen_sum = 0;
    for (int64_t j = 0; j < k; ++j) chosen_sum += p[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      ids[t * k + j] = static_cast<double>(order[j]);
      weights[t * k + j] = T(options.scaling) * p[order[j]] / (options.renormalize ? chosen_sum : T(1));
    }
  }
  write_from_vector(args.probs, probs);
  write_from_vector(args.expert_ids, ids);
  write_from_vector(args.weights, weights);
}

template <class T>
void moe_router_backward_reference(const MoeRouterBackwardArgs& args) {
  const MoeRouterOptions& options = args.options;
  const int64_t tokens = args.probs.dim(0), experts = args.probs.dim(1), k = options.top_k;
  std::vector<T> probs = to_vector<T>(args.probs), d_weights = to_vector<T>(args.d_weights);
  std::vector<T> d_probs = args.d_probs.data ? to_vector<T>(args.d_probs) : std::vector<T>(tokens * experts, T(0));
  std::vector<double> ids = to_vector<double>(args.expert_ids);
  std::vector<T> d_logits(tokens * experts);
  const T scaling = T(options.scaling);
  for (int64_t t = 0; t < tokens; ++t) {
    const T* p = probs.data() + t * experts;
    const T* dw = d_weights.data() + t * k;
    std::vector<T> dp(d_probs.begin() + t * experts, d_probs.begin() + (t + 1) * experts);
    auto id = [&](int64_t j) { return static_cast<int64_t>(ids[t * k + j]); };
    if (options.renormalize) {
      // w_j = scaling * p_j / S, S = sum_j p_j:  dw_j/dp_m = scaling * (delta_jm / S - p_j / S^2).
      T chosen_sum = 0, weighted = 0;
      for (int64_t j = 0; j < k; ++j) chosen_sum += p[id(j)];
      for (int64_t j = 0; j < k; ++j) weighted += dw[j] * p[id(j)] / chosen_sum;
      for (int64_t j = 0; j < k; ++j) dp[id(j)] += scaling / chosen_sum * (dw[j] - weighted);
    } else {
      for (int64_t j = 0; j < k; ++j) dp[id(j)] += scaling * dw[j];
    }
    T* dl = d_logits.data() + t * experts;
    if (options.scoring == RouterScoring::softmax) {
      T dot = 0;
      for (int64_t e = 0; e < experts; ++e) dot += p[e] * dp[e];
      for (int64_t e = 0; e < experts; ++e) dl[e] = p[e] * (dp[e] - dot);
    } else {
      for (int64_t e = 0; e < experts; ++e) dl[e] = dp[e] * p[e] * (T(1) - p[e]);
    }
  }
  write_from_vector(args.d_logits, d_logits);
}

template void moe_router_reference<double>(const MoeRouterArgs&);
template void moe_router_reference<float>(const MoeRouterArgs&);
template void moe_router_backward_reference<double>(const MoeRouterBackwardArgs&);
template void moe_router_backward_reference<float>(const MoeRouterBackwardArgs&);

// ---- cost ----
// exp counts as 4 FLOPs. Forward per element: softmax = max, subtract, exp, sum, scale (8);
// sigmoid = negate, exp, add, divide (7); + 1 for the bias add, + 1 compare in the top-k scan,
// + 1 more compare for the group scores; per token 3 per chosen expert (sum, scale, divide).
// Backward per element: softmax = dot (2) + subtract, multiply (4); sigmoid = 1 - p and two
// multiplies (3); + 1 where d_probs is added; per token ~6 per chosen expert.
// The op is memory and latency bound: bytes = what must be read + what is written, once.

OpCost moe_router_cost(const MoeRouterArgs& args) {
  const double tokens = static_cast<double>(args.logits.dim(0)), experts = static_cast<double>(args.logits.dim(1));
  const double k = static_cast<double>(args.options.top_k);
  double per_element = (args.options.scoring == RouterScoring::softmax ? 8.0 : 7.0) + 1.0;
  if (args.selection_bias.data) per_element += 1.0;
  if (args.options.n_groups > 1) per_element += 1.0;
  double flops = tokens * (experts * per_element + 3.0 * k);
  double bytes = tokens * experts * 4.0 * 2 + tokens * k * 8.0 + (args.selection_bias.data ? experts * 4.0 : 0.0);
  return {flops, bytes};
}

OpCost moe_router_backward_cost(const MoeRouterBackwardArgs& args) {
  const double tokens = static_cast<double>(args.probs.dim(0)), experts = static_cast<double>(args.probs.dim(1));
  const double k = static_cast<double>(args.options.top_k);
  double per_element = args.options.scoring == RouterScoring::softmax ? 4.0 : 3.0;
  if (args.d_probs.data) per_element += 1.0;
  double flops = tokens * (experts * per_element + 6.0 * k);
  double bytes = tokens * experts * 4.0 * (args.d_probs.data ? 3 : 2) + tokens * k * 8.0;
  return {flops, bytes};
}

// ---- implementations ----

// Chunks of at least ~8K logits amortise the fork/join cost of parallel_for.
static int64_t heuristic_rows(int64_t experts) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(experts, 1)); }

static MoeRouterCpuConfig forward_heuristic(const MoeRouterArgs& args) {
  return {heuristic_rows(args.logits.dim(1)), 1, 2};
}

static std::vector<MoeRouterCpuConfig> forward_space() {
  std::vector<MoeRouterCpuConfig> configs;
  for (int64_t rows : {1, 8, 64, 512}) {
    configs.push_back({rows, 1, 2});
    for (int64_t skip : {1, 2, 4}) configs.push_back({rows, 0, skip});
  }
  return configs;
}

static std::vector<MoeRouterBackwardCpuConfig> backward_space() {
  std::vector<MoeRouterBackwardCpuConfig> configs;
  for (int64_t rows : {1, 8, 64, 512}) configs.push_back({rows});
  return configs;
}

static std::string options_key(const MoeRouterOptions& options) {
  return str_cat(",top_k=", options.top_k, ",scoring=", router_scoring_name(options.scoring),
                 ",renorm=", options.renormalize ? 1 : 0, ",groups=", options.n_groups,
                 ",topk_group=", options.topk_group, ",group_experts=", options.group_score_experts);
}

// The CUDA kernels run on the host, token by token (ops/cuda_emulated_impl.h).
static void emulated_forward(const MoeRouterArgs& args, const MoeRouterCpuConfig&) {
  const moe_router_cuda::Forward kernel = moe_router_cuda::forward_of(args);
  for (int64_t t = 0; t < args.logits.dim(0); ++t) moe_router_cuda::forward_token(kernel, t);
}

static void emulated_backward(const MoeRouterBackwardArgs& args, const MoeRouterBackwardCpuConfig&) {
  const moe_router_cuda::Backward kernel = moe_router_cuda::backward_of(args);
  for (int64_t t = 0; t < args.probs.dim(0); ++t) moe_router_cuda::backward_token(kernel, t);
}

const Op<MoeRouterArgs, MoeRouterCpuConfig>& moe_router_op() {
  static const Op<MoeRouterArgs, MoeRouterCpuConfig> op(
      "moe_router",
      with_cuda_kernel(
          LATHE_ISA_IMPLS(
              moe_router_forward_kernel, [](const MoeRouterArgs& args, Isa) { return forward_heuristic(args); },
              [](const MoeRouterArgs&, Isa) { return forward_space(); }),
          cuda_emulated_impl<MoeRouterArgs, MoeRouterCpuConfig>(
              emulated_forward,
              [](const MoeRouterArgs& args) { return moe_router_cuda::supported(args.logits.dim(1), args.options); }),
          LATHE_CUDA_IMPL(moe_router_cuda_impl)),
      [](const MoeRouterArgs& args) {
        return str_cat("tokens=", args.logits.dim(0), ",experts=", args.logits.dim(1), options_key(args.options),
                       ",bias=", args.selection_bias.data ? 1 : 0);
      });
  return op;
}

const Op<MoeRouterBackwardArgs, MoeRouterBackwardCpuConfig>& moe_router_backward_op() {
  static const Op<MoeRouterBackwardArgs, MoeRouterBackwardCpuConfig> op(
      "moe_router_backward",
      with_cuda_kernel(LATHE_ISA_IMPLS(
                           moe_router_backward_kernel,
                           [](const MoeRouterBackwardArgs& args, Isa) {
                             return MoeRouterBackwardCpuConfig{heuristic_rows(args.probs.dim(1))};
                           },
                           [](const MoeRouterBackwardArgs&, Isa) { return backward_space(); }),
                       cuda_emulated_impl<MoeRouterBackwardArgs, MoeRouterBackwardCpuConfig>(
                           emulated_backward,
                           [](const MoeRouterBackwardArgs& args) {
                             return moe_router_cuda::supported(args.probs.dim(1), args.options);
                           }),
                       LATHE_CUDA_IMPL(moe_router_backward_cuda_impl)),
      [](const MoeRouterBackwardArgs& args) {
        return str_cat("tokens=", args.probs.dim(0), ",experts=", args.probs.dim(1), ",top_k=", args.options.top_k,
                       ",scoring=", router_scoring_name(args.options.scoring),
                       ",renorm=", args.options.renormalize ? 1 : 0, ",d_probs=", args.d_probs.data ? 1 : 0);
      });
  return op;
}

void moe_router(const MoeRouterArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_router_op().run(args, dispatch);
}

void moe_router_backward(const MoeRouterBackwardArgs& args, const Dispatch& dispatch) {
  validate(args);
  moe_router_backward_op().run(args, dispatch);
}

}  // namespace lathe
