// The five MoE loss ops as registered problems (tests, tuner, bench, `lathe ops`).
// Shape keys: tokens, experts, top_k; route (how expert_ids are drawn, below) and skew for the ops
// that read ids; spread (logits drawn in [-spread, spread]) for the z-loss; accumulate=1 for the
// backwards (the output starts from random values and is added to).
// Routes (ids of one token are distinct, as a router's top-k gives):
//   skewed   Zipf weights 1 / (rank + 1)^skew over a seeded permutation of the experts (default)
//   uniform  round robin: ids[t, k] = (t * top_k + k) % experts
//   all      slot 0 of every token is expert 0, which receives every token; other slots skewed
//   one      expert 0 receives exactly one token (token 0, slot 0); all else skewed over the rest
#include <cmath>
#include <cstring>
#include <numeric>

#include "lathe/core/rng.h"
#include "lathe/ops/moe_losses/moe_losses.h"
#include "lathe/ops/problem.h"

namespace lathe {
namespace {

struct RoutingShape {
  int64_t tokens, experts, top_k;
  std::string route;
  double skew;
  bool accumulate;
  RoutingShape(const ShapeSpec& spec, const std::string& op, bool has_accumulate) {
    std::vector<std::string> keys = {"tokens", "experts", "top_k", "route", "skew"};
    if (has_accumulate) keys.push_back("accumulate");
    spec.check_known(op, keys);
    tokens = spec.get_int("tokens", 512);
    experts = spec.get_int("experts", 8);
    top_k = spec.get_int("top_k", 2);
    route = spec.get("route", "skewed");
    skew = spec.get_double("skew", 1.0);
    accumulate = spec.get_int("accumulate", 0) != 0;
    LATHE_CHECK(tokens >= 0 && experts >= 1 && top_k >= 1 && top_k <= experts, op,
                ": needs tokens >= 0, experts >= 1 and 1 <= top_k <= experts, got '", spec.text(), "'");
    LATHE_CHECK(route == "skewed" || route == "uniform" || route == "all" || route == "one", op, ": route '", route,
                "' is not one of skewed, uniform, all, one");
    LATHE_CHECK(route != "one" || top_k < experts, op, ": route=one needs top_k < experts (", spec.text(), ")");
  }
};

// Picks one expert among those with weight > 0 with probability proportional to its weight.
int64_t draw_weighted(const std::vector<double>& weights, double uniform) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  double target = uniform * total, running = 0;
  int64_t last = -1;
  for (size_t e = 0; e < weights.size(); ++e) {
    if (weights[e] <= 0) continue;
    last = static_cast<int64_t>(e);
    running += weights[e];
    if (target < running) return last;
  }
  return last;  // rounding at the very end of the range
}

void fill_expert_ids(const TensorView& ids, const RoutingShape& shape, uint64_t seed) {
  const int64_t experts = shape.experts, top_k = shape.top_k;
  int32_t* out = static_cast<int32_t*>(ids.data);
  // Zipf weights over a seeded permutation, so the hot experts are not always the first ones.
  std::vector<int64_t> rank(experts);
  std::iota(rank.begin(), rank.end(), 0);
  for (int64_t i = experts - 1; i > 0; --i)
    std::swap(rank[i], rank[static_cast<int64_t>(uniform_at(seed, 101, i) * (i + 1))]);
  std::vector<double> zipf(experts);
  for (int64_t e = 0; e < experts; ++e) zipf[e] = 1.0 / std::pow(static_cast<double>(rank[e] + 1), shape.skew);
  const bool reserve_expert_0 = shape.route == "all" || shape.route == "one";
  for (int64_t t = 0; t < shape.tokens; ++t) {
    int32_t* row = out + t * top_k;
    if (shape.route == "uniform") {
      for (int64_t k = 0; k < top_k; ++k) row[k] = static_cast<int32_t>((t * top_k + k) % experts);
      continue;
    }
    std::vector<double> weights = zipf;
    int64_t k = 0;
    if (reserve_expert_0) {
      weights[0] = 0;  // only where the route forces it
      if (shape.route == "all" || t == 0) row[k++] = 0;
    }
    for (; k < top_k; ++k) {
      const int64_t expert = draw_weighted(weights, uniform_at(seed, 102, static_cast<uint64_t>(t * top_k + k)));
      row[k] = static_cast<int32_t>(expert);
      weights[expert] = 0;  // distinct within a token
    }
  }
}

// Router probabilities: the softmax of uniform logits in [-3, 3], row by row.
void fill_router_probs(const TensorView& probs, uint64_t seed) {
  const int64_t tokens = probs.dim(0), experts = probs.dim(1);
  Tensor logits = Tensor::empty({tokens, experts}, DType::f64);
  fill_uniform(logits, seed, -3, 3, 103);
  std::vector<double> values = to_vector<double>(logits);
  for (int64_t t = 0; t < tokens; ++t) {
    double* row = values.data() + t * experts;
    double max_value = *std::max_element(row, row + experts), sum = 0;
    for (int64_t e = 0; e < experts; ++e) sum += (row[e] = std::exp(row[e] - max_value));
    for (int64_t e = 0; e < experts; ++e) row[e] /= sum;
  }
  write_from_vector(probs, values);
}

void copy_tensor(const TensorView& from, const TensorView& to) {
  if (from.numel() > 0) std::memcpy(to.data, from.data, static_cast<size_t>(from.numel()) * dtype_size(from.dtype));
}

constexpr float kDLoss = 0.37f;  // a coefficient times an upstream gradient, not 1

class LoadBalancingLossProblem : public TypedProblem<MoeLoadBalancingLossArgs, MoeLossesCpuConfig> {
 public:
  LoadBalancingLossProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(moe_load_balancing_loss_op(), moe_load_balancing_loss) {
    RoutingShape shape(spec, "moe_load_balancing_loss", false);
    args_.probs = output_tensor({shape.tokens, shape.experts}, DType::f32);
    fill_router_probs(args_.probs, seed);
    args_.expert_ids = output_tensor({shape.tokens, shape.top_k}, DType::i32);
    fill_expert_ids(args_.expert_ids, shape, seed);
    args_.loss = output_tensor({1}, DType::f32);
  }
  OpCost cost() const override { return moe_load_balancing_loss_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"loss", args_.loss}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeLoadBalancingLossArgs args = args_;
    args.loss = into[0];
    use_double ? moe_load_balancing_loss_reference<double>(args) : moe_load_balancing_loss_reference<float>(args);
  }
};

class LoadBalancingLossBackwardProblem : public TypedProblem<MoeLoadBalancingLossBackwardArgs, MoeLossesCpuConfig> {
 public:
  LoadBalancingLossBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(moe_load_balancing_loss_backward_op(), moe_load_balancing_loss_backward) {
    RoutingShape shape(spec, "moe_load_balancing_loss_backward", true);
    args_.expert_ids = output_tensor({shape.tokens, shape.top_k}, DType::i32);
    fill_expert_ids(args_.expert_ids, shape, seed);
    args_.d_loss = kDLoss;
    args_.accumulate = shape.accumulate;
    args_.d_probs = output_tensor({shape.tokens, shape.experts}, DType::f32);
    if (args_.accumulate) initial_ = random_tensor({shape.tokens, shape.experts}, DType::f32, seed, -1e-3, 1e-3);
  }
  OpCost cost() const override { return moe_load_balancing_loss_backward_cost(args_); }
  void prepare_run() override {
    if (args_.accumulate) copy_tensor(initial_, args_.d_probs);
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"d_probs", args_.d_probs}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeLoadBalancingLossBackwardArgs args = args_;
    args.d_probs = into[0];
    if (args.accumulate) write_from_vector(into[0], to_vector<double>(initial_));
    use_double ? moe_load_balancing_loss_backward_reference<double>(args)
               : moe_load_balancing_loss_backward_reference<float>(args);
  }

 private:
  TensorView initial_;
};

struct LogitShape {
  int64_t tokens, experts;
  double spread;
  bool accumulate;
  LogitShape(const ShapeSpec& spec, const std::string& op, bool has_accumulate) {
    std::vector<std::string> keys = {"tokens", "experts", "spread"};
    if (has_accumulate) keys.push_back("accumulate");
    spec.check_known(op, keys);
    tokens = spec.get_int("tokens", 512);
    experts = spec.get_int("experts", 8);
    spread = spec.get_double("spread", 4.0);
    accumulate = spec.get_int("accumulate", 0) != 0;
    LATHE_CHECK(tokens >= 0 && experts >= 1, op, ": needs tokens >= 0 and experts >= 1, got '", spec.text(), "'");
  }
};

class ZLossProblem : public TypedProblem<MoeZLossArgs, MoeLossesCpuConfig> {
 public:
  ZLossProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(moe_z_loss_op(), moe_z_loss) {
    LogitShape shape(spec, "moe_z_loss", false);
    args_.logits = random_tensor({shape.tokens, shape.experts}, DType::f32, seed, -shape.spread, shape.spread);
    args_.loss = output_tensor({1}, DType::f32);
  }
  OpCost cost() const override { return moe_z_loss_cost(args_); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"loss", args_.loss}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeZLossArgs args = args_;
    args.loss = into[0];
    use_double ? moe_z_loss_reference<double>(args) : moe_z_loss_reference<float>(args);
  }
};

class ZLossBackwardProblem : public TypedProblem<MoeZLossBackwardArgs, MoeLossesCpuConfig> {
 public:
  ZLossBackwardProblem(const ShapeSpec& spec, uint64_t seed)
      : TypedProblem(moe_z_loss_backward_op(), moe_z_loss_backward) {
    LogitShape shape(spec, "moe_z_loss_backward", true);
    args_.logits = random_tensor({shape.tokens, shape.experts}, DType::f32, seed, -shape.spread, shape.spread);
    args_.d_loss = kDLoss;
    args_.accumulate = shape.accumulate;
    args_.d_logits = output_tensor({shape.tokens, shape.experts}, DType::f32);
    if (args_.accumulate) initial_ = random_tensor({shape.tokens, shape.experts}, DType::f32, seed, -1e-2, 1e-2);
  }
  OpCost cost() const override { return moe_z_loss_backward_cost(args_); }
  void prepare_run() override {
    if (args_.accumulate) copy_tensor(initial_, args_.d_logits);
  }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return {{"d_logits", args_.d_logits}}; }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeZLossBackwardArgs args = args_;
    args.d_logits = into[0];
    if (args.accumulate) write_from_vector(into[0], to_vector<double>(initial_));
    use_double ? moe_z_loss_backward_reference<double>(args) : moe_z_loss_backward_reference<float>(args);
  }

 private:
  TensorView initial_;
};

class BiasUpdateProblem : public TypedProblem<MoeBiasUpdateArgs, MoeLossesCpuConfig> {
 public:
  BiasUpdateProblem(const ShapeSpec& spec, uint64_t seed) : TypedProblem(moe_bias_update_op(), moe_bias_update) {
    RoutingShape shape(spec, "moe_bias_update", false);
    args_.expert_ids = output_tensor({shape.tokens, shape.top_k}, DType::i32);
    fill_expert_ids(args_.expert_ids, shape, seed);
    initial_bias_ = random_tensor({shape.experts}, DType::f32, seed, -0.1, 0.1);
    args_.bias = output_tensor({shape.experts}, DType::f32);
    args_.counts = output_tensor({shape.experts}, DType::i64);
    args_.rate = 1e-3f;
    prepare_run();
  }
  OpCost cost() const override { return moe_bias_update_cost(args_); }
  void prepare_run() override { copy_tensor(initial_bias_, args_.bias); }

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    return {{"bias", args_.bias}, {"counts", args_.counts}};
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    MoeBiasUpdateArgs args = args_;
    args.bias = into[0];
    args.counts = into[1];
    write_from_vector(into[0], to_vector<double>(initial_bias_));
    use_double ? moe_bias_update_reference<double>(args) : moe_bias_update_reference<float>(args);
  }

 private:
  TensorView initial_bias_;
};

// ---------------------------------------------------------------------------------------------
// Shapes

std::string random_routing_shape(uint64_t seed, bool with_accumulate) {
  const int64_t experts = random_extent(seed, 1, 1, seed % 4 == 0 ? 300 : 40);
  const int64_t top_k = random_extent(seed, 2, 1, std::min<int64_t>(experts, 9));
  const char* routes[] = {"skewed", "uniform", "all", "one"};
  std::string route = routes[random_extent(seed, 3, 0, 3)];
  if (route == "one" && top_k >= experts) route = "skewed";
  return str_cat("tokens=", random_extent(seed, 0, 0, 300), ",experts=", experts, ",top_k=", top_k, ",route=", route,
                 ",skew=", random_extent(seed, 4, 0, 3), with_accumulate && seed % 2 ? ",accumulate=1" : "");
}

std::string random_logit_shape(uint64_t seed, bool with_accumulate) {
  const int64_t spreads[] = {1, 4, 30};
  return str_cat("tokens=", random_extent(seed, 0, 0, 300), ",experts=", random_extent(seed, 1, 1, 300),
                 ",spread=", spreads[random_extent(seed, 2, 0, 2)], with_accumulate && seed % 2 ? ",accumulate=1" : "");
}

const std::vector<NamedShape> kRoutingBenchShapes = {
    {"Mixtral-8x7B router: 8 experts top-2, 4096 tokens", "tokens=4096,experts=8,top_k=2"},
    {"OLMoE router: 64 experts top-8, 1024 tokens", "tokens=1024,experts=64,top_k=8"},
    {"Qwen3-30B-A3B router: 128 experts top-8, 4096 tokens", "tokens=4096,experts=128,top_k=8"},
    {"DeepSeek-V3 router: 256 experts top-8, 4096 tokens", "tokens=4096,experts=256,top_k=8"},
    {"DeepSeek-V3 router: 256 experts top-8, 512 tokens", "tokens=512,experts=256,top_k=8"},
};
const std::vector<NamedShape> kLogitBenchShapes = {
    {"Mixtral-8x7B router logits: 8 experts, 4096 tokens", "tokens=4096,experts=8"},
    {"OLMoE router logits: 64 experts, 1024 tokens", "tokens=1024,experts=64"},
    {"Qwen3-30B-A3B router logits: 128 experts, 4096 tokens", "tokens=4096,experts=128"},
    {"DeepSeek-V3 router logits: 256 experts, 4096 tokens", "tokens=4096,experts=256"},
    {"DeepSeek-V3 router logits: 256 experts, 512 tokens", "tokens=512,experts=256"},
};
// Zero tokens; a single token; one expert that receives every token (route=all; with top_k=1 all
// other experts receive none); an expert that receives exactly one token (route=one); most of 256
// experts receiving none (50 skewed tokens); expert counts of 1, 17 and 33 (no vector width).
const std::vector<std::string> kRoutingEdgeShapes = {
    "tokens=0,experts=8,top_k=2",
    "tokens=1,experts=8,top_k=2",
    "tokens=1,experts=1,top_k=1",
    "tokens=37,experts=8,top_k=1,route=all",
    "tokens=45,experts=17,top_k=3,route=all",
    "tokens=29,experts=17,top_k=3,route=one",
    "tokens=64,experts=8,top_k=2,route=uniform",
    "tokens=50,experts=256,top_k=8",
    "tokens=300,experts=33,top_k=4,skew=2",
};
std::vector<std::string> with_accumulate(std::vector<std::string> shapes) {
  const size_t count = shapes.size();
  for (size_t i = 0; i < count; ++i) shapes.push_back(shapes[i] + ",accumulate=1");
  return shapes;
}
const std::vector<std::string> kLogitEdgeShapes = {
    "tokens=0,experts=8",
    "tokens=1,experts=8",
    "tokens=5,experts=1",
    "tokens=37,experts=17",
    "tokens=64,experts=128,spread=60",
    "tokens=3,experts=257",
};

template <class Problem>
std::function<std::unique_ptr<OpProblem>(const ShapeSpec&, uint64_t)> maker() {
  return [](const ShapeSpec& spec, uint64_t seed) -> std::unique_ptr<OpProblem> {
    return std::make_unique<Problem>(spec, seed);
  };
}

}  // namespace

void register_moe_losses_ops(std::vector<OpRegistration>& ops) {
  const std::vector<std::string> routing_keys = {"tokens", "experts", "top_k", "route", "skew"};
  const std::vector<std::string> routing_backward_keys = {"tokens", "experts", "top_k", "route", "skew", "accumulate"};
  ops.push_back({"moe_load_balancing_loss",
                 "Switch-style MoE load-balancing loss (transformers' load_balancing_loss_func)", routing_keys,
                 "tokens=4096,experts=128,top_k=8", kRoutingBenchShapes, kRoutingEdgeShapes,
                 [](uint64_t seed) { return random_routing_shape(seed, false); }, maker<LoadBalancingLossProblem>()});
  ops.push_back({"moe_load_balancing_loss_backward", "gradient of the load-balancing loss for the router probabilities",
                 routing_backward_keys, "tokens=4096,experts=128,top_k=8", kRoutingBenchShapes,
                 with_accumulate(kRoutingEdgeShapes), [](uint64_t seed) { return random_routing_shape(seed, true); },
                 maker<LoadBalancingLossBackwardProblem>()});
  ops.push_back({"moe_z_loss",
                 "router z-loss (ST-MoE): mean over tokens of logsumexp(logits)^2",
                 {"tokens", "experts", "spread"},
                 "tokens=4096,experts=128",
                 kLogitBenchShapes,
                 kLogitEdgeShapes,
                 [](uint64_t seed) { return random_logit_shape(seed, false); },
                 maker<ZLossProblem>()});
  ops.push_back({"moe_z_loss_backward",
                 "gradient of the router z-loss for the logits",
                 {"tokens", "experts", "spread", "accumulate"},
                 "tokens=4096,experts=128",
                 kLogitBenchShapes,
                 with_accumulate(kLogitEdgeShapes),
                 [](uint64_t seed) { return random_logit_shape(seed, true); },
                 maker<ZLossBackwardProblem>()});
  ops.push_back({"moe_bias_update",
                 "aux-loss-free balancing (DeepSeek-V3): expert counts and bias += rate * sign(mean - count)",
                 routing_keys, "tokens=4096,experts=256,top_k=8", kRoutingBenchShapes, kRoutingEdgeShapes,
                 [](uint64_t seed) { return random_routing_shape(seed, false); }, maker<BiasUpdateProblem>()});
}

}  // namespace lathe
