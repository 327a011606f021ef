// moe_router and moe_router_backward as registered problems (tests, tuner, bench, `lathe ops`).
//
// The choice of experts is discontinuous: two selection scores (or group scores) a few float ulp
// apart may order differently in float32 and in the float64 oracle, and then a whole expert id
// differs. So the inputs are drawn row by row and a row is redrawn (fresh random stream) until
// every comparison the choice depends on is either an exact tie of identical inputs (same logit,
// same bias: equal in every precision, and resolved by the lower id) or separated by far more
// than float32 rounding. Shape keys:
//   tokens, experts, top_k, scoring (softmax|sigmoid), renorm (0|1), groups, topk_group,
//   group_experts (group_score_experts), scaling, bias (0|1: a selection bias),
//   ties (0|1: logits and bias from a few levels, so many exact ties),
//   hot (0|1: expert 0 is boosted so it receives every row), d_probs (backward: 0|1).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "lathe/ops/moe_router/moe_router.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

const std::vector<std::string> kForwardKeys = {"tokens",     "experts",       "top_k",   "scoring", "renorm", "groups",
                                               "topk_group", "group_experts", "scaling", "bias",    "ties",   "hot"};

std::vector<std::string> backward_keys() {
  std::vector<std::string> keys = kForwardKeys;
  keys.push_back("d_probs");
  return keys;
}

struct RouterShape {
  int64_t tokens, experts;
  MoeRouterOptions options;
  bool bias, ties, hot, d_probs;
  RouterShape(const ShapeSpec& spec, const char* op, const std::vector<std::string>& keys) {
    spec.check_known(op, keys);
    tokens = spec.get_int("tokens", 64);
    experts = spec.get_int("experts", 8);
    options.top_k = spec.get_int("top_k", 2);
    options.scoring = parse_router_scoring(spec.get("scoring", "softmax"));
    options.renormalize = spec.get_int("renorm", 0) != 0;
    options.n_groups = spec.get_int("groups", 1);
    options.topk_group = spec.get_int("topk_group", 1);
    options.group_score_experts = spec.get_int("group_experts", 2);
    options.scaling = static_cast<float>(spec.get_double("scaling", 1.0));
    bias = spec.get_int("bias", 0) != 0;
    ties = spec.get_int("ties", 0) != 0;
    hot = spec.get_int("hot", 0) != 0;
    d_probs = spec.get_int("d_probs", 0) != 0;
  }
  // Selection biases of the size real ones reach relative to the probabilities.
  double bias_range() const {
    return options.scoring == RouterScoring::sigmoid ? 0.1 : 1.0 / std::max<int64_t>(experts, 1);
  }
};

// ---- inputs whose expert choice is the same in every precision ----

constexpr double kMargin = 1e-5;  // relative separation asked of every deciding comparison (float32: ~1e-7)

// Different but within kMargin of the larger magnitude involved (a score is p + bias, so float32
// rounds it on the scale of the bias too).
bool too_close(double a, double b, double bias_scale) {
  return a != b && std::fabs(a - b) <= kMargin * std::max({std::fabs(a), std::fabs(b), bias_scale});
}

// Whether the float32 and float64 choices of this row must agree (see the file comment).
bool row_is_well_posed(const float* logits, const float* bias, const RouterShape& shape) {
  const MoeRouterOptions& options = shape.options;
  const int64_t experts = shape.experts, group_size = experts / options.n_groups;
  std::vector<double> p(experts), s(experts);
  if (options.scoring == RouterScoring::softmax) {
    double max_logit = *std::max_element(logits, logits + experts), sum = 0;
    for (int64_t e = 0; e < experts; ++e) sum += (p[e] = std::exp(double(logits[e]) - max_logit));
    for (int64_t e = 0; e < experts; ++e) p[e] /= sum;
  } else {
    for (int64_t e = 0; e < experts; ++e) p[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
  }
  double bias_scale = 0;
  for (int64_t e = 0; e < experts; ++e) {
    s[e] = p[e] + (bias ? double(bias[e]) : 0.0);
    if (bias) bias_scale = std::max(bias_scale, std::fabs(double(bias[e])));
  }
  auto same_inputs = [&](int64_t a, int64_t b) { return logits[a] == logits[b] && (!bias || bias[a] == bias[b]); };
  auto sorted = [&](std::vector<int64_t> ids, const std::vector<double>& key) {
    std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return key[a] > key[b]; });
    return ids;
  };
  std::vector<int64_t> selectable(experts);
  std::iota(selectable.begin(), selectable.end(), int64_t{0});
  if (options.n_groups > 1) {
    std::vector<double> group_score(options.n_groups, 0.0);
    std::vector<std::vector<int64_t>> group_best(options.n_groups);
    for (int64_t g = 0; g < options.n_groups; ++g) {
      std::vector<int64_t> members(group_size);
      std::iota(members.begin(), members.end(), g * group_size);
      group_best[g] = sorted(members, s);
      group_best[g].resize(options.group_score_experts);
      for (int64_t e : group_best[g]) group_score[g] += s[e];
    }
    std::vector<int64_t> groups(options.n_groups);
    std::iota(groups.begin(), groups.end(), int64_t{0});
    groups = sorted(groups, group_score);
    if (options.topk_group < options.n_groups) {
      int64_t last_kept = groups[options.topk_group - 1], first_dropped = groups[options.topk_group];
      if (too_close(group_score[last_kept], group_score[first_dropped], bias_scale)) return false;
      if (group_score[last_kept] == group_score[first_dropped])
        for (int64_t i = 0; i < options.group_score_experts; ++i)
          if (!same_inputs(group_best[last_kept][i], group_best[first_dropped][i])) return false;
    }
    selectable.clear();
    for (int64_t rank = 0; rank < options.topk_group; ++rank)
      for (int64_t e = 0; e < group_size; ++e) selectable.push_back(groups[rank] * group_size + e);
  }
  std::vector<int64_t> order = sorted(selectable, s);
  for (int64_t j = 0; j < options.top_k && j + 1 < static_cast<int64_t>(order.size()); ++j) {
    int64_t a = order[j], b = order[j + 1];
    if (too_close(s[a], s[b], bias_scale) || (s[a] == s[b] && !same_inputs(a, b))) return false;
  }
  return true;
}

void fill_logits_row(const TensorView& logits, int64_t row, const RouterShape& shape, uint64_t seed, uint64_t stream) {
  TensorView view = logits.slice(0, row, row + 1);
  float* values = static_cast<float*>(view.data);
  if (shape.ties) {
    // Seven levels 0.3 + 0.5 k, k = -3..3: never symmetric about 0, so no two sigmoid pairs sum
    // to exactly 1 (sigmoid(a) + sigmoid(-a) = 1) from different inputs.
    fill_uniform(view, seed, 0, 7, stream);
    for (int64_t e = 0; e < shape.experts; ++e) values[e] = 0.3f + 0.5f * (std::floor(values[e]) - 3.0f);
  } else {
    fill_uniform(view, seed, -2, 2, stream);
  }
  if (shape.hot && shape.experts > 0) values[0] += 10.0f;
}

// Fills logits (and bias if given) so every row is well posed.
void fill_router_inputs(const TensorView& logits, const TensorView& bias, const RouterShape& shape, uint64_t seed) {
  const float* bias_values = nullptr;
  if (bias.data) {
    fill_uniform(bias, seed, -shape.bias_range(), shape.bias_range(), 1);
    float* values = static_cast<float*>(bias.data);
    if (shape.ties)
      for (int64_t e = 0; e < shape.experts; ++e)
        values[e] = values[e] > 0 ? static_cast<float>(shape.bias_range()) : 0.0f;
    if (shape.hot && shape.experts > 0) values[0] = 1.0f;  // wins its group too (see the hot edge shapes)
    bias_values = values;
  }
  for (int64_t t = 0; t < shape.tokens; ++t) {
    const float* row = static_cast<const float*>(logits.data) + t * shape.experts;
    int attempt = 0;
    do {
      fill_logits_row(logits, t, shape, seed, (static_cast<uint64_t>(attempt) << 40) + 1000 + static_cast<uint64_t>(t));
    } while (!row_is_well_posed(row, bias_values, shape) && ++attempt < 1000);
    LATHE_ASSERT(attempt < 1000);
  }
}

class MoeRouterProblem : public TypedProblem<MoeRouterArgs, MoeRouterCpuConfig> {
 public:
  MoeRouterProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(moe_router_op(), moe_router) {
    RouterShape shape(spec, "moe_router", kForwardKeys);
    const int64_t k = shape.options.top_k;
    args_.options = shape.options;
    args_.logits = output_tensor({shape.tokens, shape.experts}, DType::f32);
    if (shape.bias) args_.selection_bias = output_tensor({shape.experts}, DType::f32);
    if (shape.experts >= 1) fill_router_inputs(args_.logits, args_.selection_bias, shape, seed);
    args_.probs = output_tensor({shape.tokens, shape.experts}, DType::f32);
    args_.expert_ids = output_tensor({shape.tokens, k}, DType::i32);
    args_.weights = output_tensor({shape.tokens, k}, DType::f32);
  }
  OpCost cost() const override { return moe_router_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    return {{"probs", args_.probs}, {"expert_ids", args_.expert_ids}, {"weights", args_.weights}};
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeRouterArgs args = args_;
    args.probs = into[0];
    args.expert_ids = into[1];
    args.weights = into[2];
    use_double ? moe_router_reference<double>(args) : moe_router_reference<float>(args);
  }
};

class MoeRouterBackwardProblem : public TypedProblem<MoeRouterBackwardArgs, MoeRouterBackwardCpuConfig> {
 public:
  MoeRouterBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(moe_router_backward_op(), moe_router_backward) {
    RouterShape shape(spec, "moe_router_backward", backward_keys());
    const int64_t k = shape.options.top_k;
    args_.options = shape.options;
    // probs and expert_ids as the forward saves them.
    MoeRouterArgs forward;
    forward.options = shape.options;
    forward.logits = output_tensor({shape.tokens, shape.experts}, DType::f32);
    if (shape.bias) forward.selection_bias = output_tensor({shape.experts}, DType::f32);
    if (shape.experts >= 1) fill_router_inputs(forward.logits, forward.selection_bias, shape, seed);
    forward.probs = args_.probs = output_tensor({shape.tokens, shape.experts}, DType::f32);
    forward.expert_ids = args_.expert_ids = output_tensor({shape.tokens, k}, DType::i32);
    forward.weights = output_tensor({shape.tokens, k}, DType::f32);
    if (shape.experts >= 1 && k >= 1) moe_router_reference<double>(forward);
    args_.d_weights = random_tensor({shape.tokens, k}, DType::f32, seed, -1, 1);
    if (shape.d_probs) args_.d_probs = random_tensor({shape.tokens, shape.experts}, DType::f32, seed, -1, 1);
    args_.d_logits = output_tensor({shape.tokens, shape.experts}, DType::f32);
  }
  OpCost cost() const override { return moe_router_backward_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"d_logits", args_.d_logits}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeRouterBackwardArgs args = args_;
    args.d_logits = into[0];
    use_double ? moe_router_backward_reference<double>(args) : moe_router_backward_reference<float>(args);
  }
};

// Random routing shapes: groups first (so they divide the experts), sizes not multiples of the
// vector width, every option drawn.
std::string random_router_shape(uint64_t seed, bool backward) {
  const int64_t group_choices[] = {1, 1, 1, 2, 4, 8};
  const int64_t groups = group_choices[random_extent(seed, 0, 0, 5)];
  const int64_t experts = groups == 1 ? random_extent(seed, 1, 1, 300) : groups * random_extent(seed, 1, 1, 40);
  const int64_t group_size = experts / groups;
  const int64_t topk_group = random_extent(seed, 2, 1, groups);
  const int64_t top_k = random_extent(seed, 3, 1, std::min<int64_t>(10, topk_group * group_size));
  std::string shape =
      str_cat("tokens=", random_extent(seed, 4, 0, 200), ",experts=", experts, ",top_k=", top_k,
              seed % 2 ? ",scoring=sigmoid" : "", seed % 3 == 0 ? ",renorm=1" : "", seed % 5 < 2 ? ",bias=1" : "",
              seed % 7 == 0 ? ",ties=1" : "", seed % 11 == 0 ? ",scaling=2.5" : "");
  if (groups > 1)
    shape += str_cat(",groups=", groups, ",topk_group=", topk_group,
                     ",group_experts=", random_extent(seed, 5, 1, std::min<int64_t>(3, group_size)));
  if (backward && seed % 4 < 2) shape += ",d_probs=1";
  return shape;
}

const std::vector<NamedShape> kBenchShapes = {
    {"Mixtral-8x7B router: 2048 tokens, 8 experts, softmax top-2, renormalised",
     "tokens=2048,experts=8,top_k=2,renorm=1"},
    {"Qwen3-30B-A3B router: 2048 tokens, 128 experts, softmax top-8, norm_topk_prob",
     "tokens=2048,experts=128,top_k=8,renorm=1"},
    {"OLMoE-1B-7B router: 2048 tokens, 64 experts, softmax top-8, not renormalised", "tokens=2048,experts=64,top_k=8"},
    {"GPT-OSS-20B router: 2048 tokens, 32 experts, top-4 (softmax over the chosen logits)",
     "tokens=2048,experts=32,top_k=4,renorm=1"},
    {"DeepSeek-V3 router: 2048 tokens, 256 experts, sigmoid + bias, 8 groups keep 4, top-8, x2.5",
     "tokens=2048,experts=256,top_k=8,scoring=sigmoid,bias=1,groups=8,topk_group=4,group_experts=2,renorm=1,"
     "scaling=2.5"},
};

const std::vector<NamedShape> kBackwardBenchShapes = {
    {"Mixtral-8x7B router backward: 2048 tokens, 8 experts, top-2, renormalised",
     "tokens=2048,experts=8,top_k=2,renorm=1"},
    {"Qwen3-30B-A3B router backward: 2048 tokens, 128 experts, top-8, + aux-loss d_probs",
     "tokens=2048,experts=128,top_k=8,renorm=1,d_probs=1"},
    {"OLMoE-1B-7B router backward: 2048 tokens, 64 experts, top-8", "tokens=2048,experts=64,top_k=8"},
    {"DeepSeek-V3 router backward: 2048 tokens, 256 experts, sigmoid, top-8, x2.5",
     "tokens=2048,experts=256,top_k=8,scoring=sigmoid,bias=1,groups=8,topk_group=4,renorm=1,scaling=2.5"},
};

// Routing edge cases (the expert-load cases the MoE contract asks for are named).
const std::vector<std::string> kEdgeShapes = {
    "tokens=0,experts=8,top_k=2",           // no tokens
    "tokens=1,experts=5,top_k=2,renorm=1",  // one token: two experts get one row, three get none
    "tokens=7,experts=17,top_k=1,hot=1",    // expert 0 receives every row, the rest none; 17 experts
    "tokens=6,experts=64,top_k=8,scoring=sigmoid,bias=1,groups=8,topk_group=4,renorm=1,hot=1",  // hot, grouped
    "tokens=3,experts=1,top_k=1",                 // a single expert: weight 1 for every row
    "tokens=9,experts=37,top_k=3,ties=1,bias=1",  // exact ties, resolved by the lower id
    "tokens=8,experts=24,top_k=3,scoring=sigmoid,groups=6,topk_group=2,group_experts=1,ties=1",       // tied groups
    "tokens=5,experts=48,top_k=4,scoring=sigmoid,bias=1,groups=4,topk_group=2,renorm=1,scaling=2.5",  // V3 in small
    "tokens=3,experts=6,top_k=6,scoring=sigmoid,renorm=1",  // every expert chosen
    "tokens=4,experts=300,top_k=8,ties=1",                  // more experts than any model; ties
};

const std::vector<std::string> kBackwardEdgeShapes = {
    "tokens=0,experts=8,top_k=2",
    "tokens=1,experts=5,top_k=2,renorm=1,d_probs=1",
    "tokens=7,experts=17,top_k=1,hot=1",
    "tokens=3,experts=1,top_k=1,renorm=1,d_probs=1",  // one expert, renormalised: d_logits = 0 exactly
    "tokens=5,experts=48,top_k=4,scoring=sigmoid,bias=1,groups=4,topk_group=2,renorm=1,scaling=2.5,d_probs=1",
    "tokens=3,experts=6,top_k=6,scoring=sigmoid,renorm=1",
    "tokens=4,experts=300,top_k=8,scaling=2.5",
};

}  // namespace

void register_moe_router_ops(std::vector<OpRegistration>& ops) {
  ops.push_back({"moe_router",
                 "MoE router: softmax/sigmoid probabilities, (group-limited, biased) top-k, combine weights",
                 kForwardKeys, "tokens=2048,experts=128,top_k=8,renorm=1", kBenchShapes, kEdgeShapes,
                 [](uint64_t seed) { return random_router_shape(seed, false); },
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MoeRouterProblem>(spec, seed);
                 }});
  ops.push_back({"moe_router_backward", "gradient of the MoE router's combine weights (+ d_probs) to its logits",
                 backward_keys(), "tokens=2048,experts=128,top_k=8,renorm=1", kBackwardBenchShapes, kBackwardEdgeShapes,
                 [](uint64_t seed) { return random_router_shape(seed, true); },
                 [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
                   return std::make_unique<MoeRouterBackwardProblem>(spec, seed);
                 }});
}

}  // namespace lathe
