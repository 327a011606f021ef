// MoE router specifics: the float64 reference backward against central finite differences of the
// reference forward (softmax and sigmoid, with and without renormalisation, with d_probs, scaling
// != 1), exact-tie behaviour on every implementation and config, a group-limited example worked by
// hand, the selection bias moving the choice but not the weights' formula, the edge shapes routing
// as their comments say, thread-count independence, and validation errors.
#include "lathe/ops/moe_router/moe_router.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "finite_difference.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/problem.h"
#include "tensor_values.h"
#include "test_seed.h"

namespace lathe {
namespace {

Tensor random_f64(const Shape& shape, uint64_t seed, uint64_t stream, double low, double high) {
  Tensor tensor = Tensor::empty(shape, DType::f64);
  fill_uniform(tensor, seed, low, high, stream);
  return tensor;
}

// Expert ids (any dtype) as int32.
std::vector<int32_t> id_vector(const TensorView& ids) {
  std::vector<double> values = to_vector<double>(ids);
  return std::vector<int32_t>(values.begin(), values.end());
}

// Outputs of one forward call.
struct Routed {
  Tensor probs, ids, weights;
  Routed(int64_t tokens, int64_t experts, int64_t k)
      : probs(Tensor::empty({tokens, experts}, DType::f32)),
        ids(Tensor::empty({tokens, k}, DType::i32)),
        weights(Tensor::empty({tokens, k}, DType::f32)) {}
  MoeRouterArgs args(const Tensor& logits, const TensorView& bias, const MoeRouterOptions& options) const {
    return {logits, bias, probs, ids, weights, options};
  }
  std::vector<int32_t> id_list() const { return id_vector(ids); }
};

// Every usable implementation with every config of its space, through the public entry.
void for_each_impl_and_config(const MoeRouterArgs& args,
                              const std::function<void(const std::string& what)>& check_after_run) {
  for (const auto* impl : moe_router_op().usable_impls(args))
    for (const MoeRouterCpuConfig& config : impl->space(args)) {
      ConfigParams params = config_to_params(config);
      poison(args.probs);
      poison(args.expert_ids);
      poison(args.weights);
      moe_router(args, Dispatch{impl->name, &params});
      check_after_run(str_cat(impl->name, " ", params.to_string()));
    }
}

TEST(MoeRouterTest, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 3, experts = 7, k = 3;
  for (RouterScoring scoring : {RouterScoring::softmax, RouterScoring::sigmoid})
    for (bool renormalize : {false, true})
      for (bool with_d_probs : {false, true}) {
        SCOPED_TRACE(str_cat(router_scoring_name(scoring), " renormalize=", renormalize, " d_probs=", with_d_probs));
        MoeRouterOptions options;
        options.scoring = scoring;
        options.top_k = k;
        options.renormalize = renormalize;
        options.scaling = 2.5f;
        Tensor logits = random_f64({tokens, experts}, seed, 1, -2, 2);
        Tensor bias = random_f64({experts}, seed, 2, -0.2, 0.2);  // moves the choice, never the gradient
        Tensor probe_weights = random_f64({tokens, k}, seed, 3, -1, 1);
        Tensor probe_probs = random_f64({tokens, experts}, seed, 4, -1, 1);
        Tensor ids = Tensor::empty({tokens, k}, DType::i32);
        Tensor probs = Tensor::empty({tokens, experts}, DType::f64), weights = Tensor::empty({tokens, k}, DType::f64);
        moe_router_reference<double>({logits, bias, probs, ids, weights, options});
        const std::vector<int32_t> chosen = id_vector(ids);
        bool choice_moved = false;
        // loss = sum(weights * probe_weights) [+ sum(probs * probe_probs)]
        auto loss = [&] {
          Tensor p = Tensor::empty({tokens, experts}, DType::f64), w = Tensor::empty({tokens, k}, DType::f64);
          Tensor i = Tensor::empty({tokens, k}, DType::i32);
          moe_router_reference<double>({logits, bias, p, i, w, options});
          choice_moved = choice_moved || id_vector(i) != chosen;
          double sum = 0;
          for (int64_t n = 0; n < w.numel(); ++n) sum += w.ptr<double>()[n] * probe_weights.ptr<double>()[n];
          if (with_d_probs)
            for (int64_t n = 0; n < p.numel(); ++n) sum += p.ptr<double>()[n] * probe_probs.ptr<double>()[n];
          return sum;
        };
        Tensor d_logits = Tensor::empty({tokens, experts}, DType::f64);
        moe_router_backward_reference<double>(
            {probs, ids, probe_weights, with_d_probs ? probe_probs.view() : TensorView{}, d_logits, options});
        expect_gradient_matches_finite_differences(logits, d_logits, loss, "d_logits", seed);
        EXPECT_FALSE(choice_moved) << "a finite-difference step changed the choice; seed=" << seed;
      }
}

TEST(MoeRouterTest, ExactTiesGoToTheLowerExpertIdOnEveryPath) {
  // Row 0: all logits equal, so every probability is 1/40: experts 0, 1, 2.
  // Row 1: expert 3 alone is best (2.0); experts 20, 35 and 39 tie at 1.0, the rest 0: 3, 20, 35
  //        (39 loses the tie; the three ties sit in different vectors at every width).
  // Row 2: experts 1, 2 and 4 tie for the best (3.0): 1, 2, 4 are all chosen, in id order; then
  //        expert 0 at 2.5 is fourth and not chosen.
  const int64_t experts = 40, k = 3;
  std::vector<float> values(3 * experts, 0.0f);
  values[experts + 3] = 2.0f;
  values[experts + 20] = values[experts + 35] = values[experts + 39] = 1.0f;
  values[2 * experts + 0] = 2.5f;
  values[2 * experts + 1] = values[2 * experts + 2] = values[2 * experts + 4] = 3.0f;
  Tensor logits = f32_tensor({3, experts}, values);
  const std::vector<int32_t> expected = {0, 1, 2, 3, 20, 35, 1, 2, 4};
  for (RouterScoring scoring : {RouterScoring::softmax, RouterScoring::sigmoid}) {
    MoeRouterOptions options;
    options.scoring = scoring;
    options.top_k = k;
    options.renormalize = true;
    Routed routed(3, experts, k);
    MoeRouterArgs args = routed.args(logits, TensorView{}, options);
    for_each_impl_and_config(args, [&](const std::string& what) {
      EXPECT_EQ(routed.id_list(), expected) << router_scoring_name(scoring) << " " << what;
      // Row 0 and row 2 choose equal probabilities: renormalised weights of exactly 1/3.
      for (int64_t j : {0, 1, 2, 6, 7, 8}) EXPECT_NEAR(routed.weights.ptr<float>()[j], 1.0 / 3.0, 1e-7) << what;
    });
    Tensor ids64 = Tensor::empty({3, k}, DType::f64), probs64 = Tensor::empty({3, experts}, DType::f64);
    Tensor weights64 = Tensor::empty({3, k}, DType::f64);
    moe_router_reference<double>({logits, TensorView{}, probs64, ids64, weights64, options});
    std::vector<double> reference_ids = to_vector<double>(ids64);
    EXPECT_EQ(std::vector<int32_t>(reference_ids.begin(), reference_ids.end()), expected) << "float64 reference";
  }
}

// DeepSeek-V3-style routing on 8 experts in 4 groups of 2, sigmoid scores, keep 2 groups, top-2.
// sigmoid(3) = 0.953, sigmoid(2) = 0.881, sigmoid(1) = 0.731, sigmoid(0) = 0.5,
// sigmoid(-1) = 0.269, sigmoid(-2) = 0.119.
//   logits   = [3, -2 | 1, 1 | 2, 0 | -1, -1]
//   group scores (sum of the best 2): G0 0.953 + 0.119 = 1.072, G1 0.731 + 0.731 = 1.462,
//   G2 0.881 + 0.5 = 1.381, G3 0.269 + 0.269 = 0.538  ->  keep G1, G2 (experts 2, 3, 4, 5)
//   -> expert 4 (0.881), then 2 and 3 tie at 0.731: expert 2.   ids = [4, 2]
//   (plain top-2 would take experts 0 and 4: the best expert sits in a dropped group.)
// With group_score_experts = 1 (the group's max, DeepSeek-V2): G0 0.953, G2 0.881 win
//   -> experts 0 (0.953), 4 (0.881).   ids = [0, 4]
// With a bias of +0.7 on experts 6 and 7 (group score experts 2): G3 = 0.969 + 0.969 = 1.938 and
//   G1 1.462 are kept -> 6 and 7 tie at 0.969: ids = [6, 7]; their weights use the unbiased
//   sigmoid(-1) = 0.2689414: renormalised 0.5 each, times scaling 2.5 = 1.25.
TEST(MoeRouterTest, GroupLimitedExampleWorkedByHand) {
  Tensor logits = f32_tensor({1, 8}, {3, -2, 1, 1, 2, 0, -1, -1});
  Tensor bias = f32_tensor({8}, {0, 0, 0, 0, 0, 0, 0.7f, 0.7f});
  struct Case {
    const char* name;
    int64_t n_groups, group_score_experts;
    bool with_bias;
    std::vector<int32_t> ids;
  };
  const Case cases[] = {{"top-2 of group sums", 4, 2, false, {4, 2}},
                        {"group max", 4, 1, false, {0, 4}},
                        {"no groups", 1, 2, false, {0, 4}},
                        {"bias", 4, 2, true, {6, 7}}};
  for (const Case& c : cases) {
    MoeRouterOptions options;
    options.scoring = RouterScoring::sigmoid;
    options.top_k = 2;
    options.n_groups = c.n_groups;
    options.topk_group = c.n_groups == 1 ? 1 : 2;
    options.group_score_experts = c.group_score_experts;
    options.renormalize = true;
    options.scaling = 2.5f;
    Routed routed(1, 8, 2);
    MoeRouterArgs args = routed.args(logits, c.with_bias ? bias.view() : TensorView{}, options);
    for_each_impl_and_config(args, [&](const std::string& what) {
      EXPECT_EQ(routed.id_list(), c.ids) << c.name << " " << what;
      const double p0 = 1 / (1 + std::exp(-read_element(logits, c.ids[0])));
      const double p1 = 1 / (1 + std::exp(-read_element(logits, c.ids[1])));
      EXPECT_NEAR(routed.weights.ptr<float>()[0], 2.5 * p0 / (p0 + p1), 1e-6) << c.name << " " << what;
      EXPECT_NEAR(routed.weights.ptr<float>()[1], 2.5 * p1 / (p0 + p1), 1e-6) << c.name << " " << what;
    });
  }
  // The bias case's weights, as worked out above.
  MoeRouterOptions options;
  options.scoring = RouterScoring::sigmoid;
  options.top_k = 2;
  options.n_groups = 4;
  options.topk_group = 2;
  options.scaling = 2.5f;
  Routed routed(1, 8, 2);
  moe_router(routed.args(logits, bias, options));
  EXPECT_NEAR(routed.weights.ptr<float>()[0], 2.5 * 0.2689414, 1e-6) << "not renormalised";
  options.renormalize = true;
  moe_router(routed.args(logits, bias, options));
  EXPECT_NEAR(routed.weights.ptr<float>()[0], 1.25, 1e-6);
  EXPECT_NEAR(routed.weights.ptr<float>()[1], 1.25, 1e-6);
}

// The bias moves the choice (a large bias on the last expert puts it in every row) while probs
// stay identical and every weight still follows scaling * p[id] / sum over the chosen p, computed
// here in double from the returned probs.
TEST(MoeRouterTest, SelectionBiasMovesTheChoiceButNotTheWeights) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 50, experts = 24, k = 4;
  Tensor logits = Tensor::empty({tokens, experts}, DType::f32), bias = Tensor::empty({experts}, DType::f32);
  fill_uniform(logits, seed, -2, 2, 1);
  fill_value(bias, 0.0);
  bias.ptr<float>()[experts - 1] = 5.0f;
  for (RouterScoring scoring : {RouterScoring::softmax, RouterScoring::sigmoid})
    for (bool renormalize : {false, true}) {
      MoeRouterOptions options;
      options.scoring = scoring;
      options.top_k = k;
      options.renormalize = renormalize;
      options.scaling = 1.5f;
      Routed plain(tokens, experts, k), biased(tokens, experts, k);
      moe_router(plain.args(logits, TensorView{}, options));
      moe_router(biased.args(logits, bias, options));
      std::vector<float> plain_probs = to_vector<float>(plain.probs), biased_probs = to_vector<float>(biased.probs);
      EXPECT_EQ(plain_probs, biased_probs) << "the bias must not touch probs; seed=" << seed;
      std::vector<int32_t> plain_ids = plain.id_list(), biased_ids = biased.id_list();
      int64_t rows_with_last = 0, rows_without_last_before = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        rows_with_last += biased_ids[t * k] == experts - 1;  // the biased expert comes first
        bool plain_had_last = false;
        for (int64_t j = 0; j < k; ++j) plain_had_last = plain_had_last || plain_ids[t * k + j] == experts - 1;
        rows_without_last_before += !plain_had_last;
        for (const Routed* routed : {&plain, &biased}) {
          const float* p = routed->probs.ptr<float>() + t * experts;
          const int32_t* ids = routed->ids.ptr<int32_t>() + t * k;
          double chosen_sum = 0;
          for (int64_t j = 0; j < k; ++j) chosen_sum += p[ids[j]];
          for (int64_t j = 0; j < k; ++j)
            EXPECT_NEAR(routed->weights.ptr<float>()[t * k + j], 1.5 * p[ids[j]] / (renormalize ? chosen_sum : 1.0),
                        1e-6)
                << "row " << t << " seed=" << seed;
        }
      }
      EXPECT_EQ(rows_with_last, tokens) << "seed=" << seed;
      EXPECT_GT(rows_without_last_before, 0) << "the bias changed nothing: the test cannot fail; seed=" << seed;
    }
}

// The edge shapes of the problem file route as their comments promise (so the contract tests
// really cover an expert with every row, with one row, with none).
TEST(MoeRouterTest, EdgeShapesRouteAsDescribed) {
  const uint64_t seed = test_seed();
  auto route = [&](const std::string& shape) {
    auto problem = find_op("moe_router").make_problem(ShapeSpec::parse(shape), seed);
    problem->run("", nullptr);
    auto* typed = dynamic_cast<TypedProblem<MoeRouterArgs, MoeRouterCpuConfig>*>(problem.get());
    EXPECT_NE(typed, nullptr);
    const MoeRouterArgs& args = typed->args();
    std::vector<int64_t> rows_per_expert(args.logits.dim(1), 0);
    for (int32_t id : id_vector(args.expert_ids)) ++rows_per_expert.at(id);
    return rows_per_expert;
  };
  for (const char* hot : {"tokens=7,experts=17,top_k=1,hot=1",
                          "tokens=6,experts=64,top_k=8,scoring=sigmoid,bias=1,groups=8,topk_group=4,renorm=1,hot=1"}) {
    std::vector<int64_t> rows = route(hot);
    EXPECT_EQ(rows[0], std::string(hot).find("tokens=7") == 0 ? 7 : 6) << hot << " seed=" << seed;
  }
  std::vector<int64_t> rows = route("tokens=1,experts=5,top_k=2,renorm=1");
  EXPECT_EQ(std::count(rows.begin(), rows.end(), 1), 2) << "seed=" << seed;
  EXPECT_EQ(std::count(rows.begin(), rows.end(), 0), 3) << "seed=" << seed;
}

TEST(MoeRouterTest, ResultsDoNotDependOnTheThreadCount) {
  const uint64_t seed = test_seed();
  const int original_threads = num_threads();
  for (const char* name : {"moe_router", "moe_router_backward"}) {
    const std::string shape = "tokens=301,experts=48,top_k=6,scoring=sigmoid,bias=1,groups=4,topk_group=2,renorm=1";
    auto problem = find_op(name).make_problem(ShapeSpec::parse(shape), seed);
    std::vector<std::vector<double>> first;
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      ConfigParams config = ConfigParams::parse("rows_per_task=8");
      if (std::string(name) == "moe_router") config = ConfigParams::parse("rows_per_task=8,filter=1,skip_vectors=2");
      problem->run(problem->impl_names().front(), &config);
      std::vector<std::vector<double>> outputs;
      for (const auto& output : problem->outputs()) outputs.push_back(to_vector<double>(output.second));
      if (first.empty())
        first = outputs;
      else
        EXPECT_EQ(outputs, first) << name << " threads=" << threads << " seed=" << seed;
    }
  }
  set_num_threads(original_threads);
}

TEST(MoeRouterTest, ScoringNamesRoundTripAndUnknownOnesAreRefused) {
  for (RouterScoring scoring : {RouterScoring::softmax, RouterScoring::sigmoid})
    EXPECT_EQ(parse_router_scoring(router_scoring_name(scoring)), scoring);
  try {
    parse_router_scoring("tanh");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'tanh' (accepted: softmax, sigmoid)"), std::string::npos) << error.what();
  }
}

void expect_error(const std::function<void()>& call, const std::string& expected) {
  try {
    call();
    ADD_FAILURE() << "expected an error containing: " << expected;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
  }
}

TEST(MoeRouterTest, RejectsInvalidArgumentsNamingThem) {
  const int64_t tokens = 4, experts = 8;
  Tensor logits = Tensor::empty({tokens, experts}, DType::f32);
  fill_value(logits, 0.5);
  Routed routed(tokens, experts, 2);
  auto forward_with = [&](const std::function<void(MoeRouterArgs&)>& change) {
    return [&, change] {
      MoeRouterArgs args = routed.args(logits, TensorView{}, MoeRouterOptions{});
      change(args);
      moe_router(args);
    };
  };
  auto options_with = [&](const std::function<void(MoeRouterOptions&)>& change) {
    return forward_with([change](MoeRouterArgs& args) { change(args.options); });
  };
  expect_error(options_with([](MoeRouterOptions& o) { o.top_k = 0; }),
               "moe_router: top_k must be in [1, experts = 8], got 0");
  expect_error(options_with([](MoeRouterOptions& o) { o.top_k = 9; }), "top_k must be in [1, experts = 8], got 9");
  expect_error(options_with([](MoeRouterOptions& o) { o.n_groups = 3; }), "n_groups must divide experts = 8, got 3");
  expect_error(options_with([](MoeRouterOptions& o) { o.n_groups = 4, o.topk_group = 5; }),
               "topk_group must be in [1, n_groups = 4], got 5");
  expect_error(options_with([](MoeRouterOptions& o) { o.n_groups = 4, o.topk_group = 0; }),
               "topk_group must be in [1, n_groups = 4], got 0");
  expect_error(options_with([](MoeRouterOptions& o) { o.n_groups = 4, o.topk_group = 1, o.top_k = 3; }),
               "top_k = 3 exceeds the experts of the kept groups (topk_group * experts / n_groups = 2)");
  expect_error(options_with([](MoeRouterOptions& o) { o.n_groups = 4, o.topk_group = 2, o.group_score_experts = 3; }),
               "group_score_experts must be in [1, experts / n_groups = 2], got 3");
  expect_error(options_with([](MoeRouterOptions& o) { o.scaling = 0.0f; }), "scaling must be finite and positive");
  expect_error(options_with([](MoeRouterOptions& o) { o.scaling = NAN; }), "scaling must be finite and positive");

  Tensor f64_logits = Tensor::empty({tokens, experts}, DType::f64), short_bias = Tensor::empty({7}, DType::f32);
  Tensor f32_ids = Tensor::empty({tokens, 2}, DType::f32), wide_weights = Tensor::empty({tokens, 3}, DType::f32);
  expect_error(forward_with([&](MoeRouterArgs& a) { a.logits = f64_logits; }),
               "moe_router: logits has dtype f64, expected f32");
  expect_error(forward_with([&](MoeRouterArgs& a) { a.selection_bias = short_bias; }),
               "moe_router: selection_bias has shape (7), expected (8)");
  expect_error(forward_with([&](MoeRouterArgs& a) { a.expert_ids = f32_ids; }),
               "expert_ids has dtype f32, expected i32");
  expect_error(forward_with([&](MoeRouterArgs& a) { a.weights = wide_weights; }),
               "weights has shape (4, 3), expected (4, 2)");
  expect_error(forward_with([&](MoeRouterArgs& a) { a.probs = TensorView{}; }), "moe_router: probs is missing");

  // Backward: shapes, and an expert id outside the row.
  Tensor probs = Tensor::empty({tokens, experts}, DType::f32), d_weights = Tensor::empty({tokens, 2}, DType::f32);
  Tensor ids = Tensor::zeros({tokens, 2}, DType::i32), d_logits = Tensor::empty({tokens, experts}, DType::f32);
  Tensor short_d_probs = Tensor::empty({tokens, experts - 1}, DType::f32);
  fill_value(probs, 0.125);
  fill_value(d_weights, 1.0);
  ids.ptr<int32_t>()[1] = 1;
  MoeRouterBackwardArgs good{probs, ids, d_weights, TensorView{}, d_logits, MoeRouterOptions{}};
  EXPECT_NO_THROW(moe_router_backward(good));
  MoeRouterBackwardArgs bad = good;
  bad.d_probs = short_d_probs;
  expect_error([&] { moe_router_backward(bad); }, "moe_router_backward: d_probs has shape (4, 7), expected (4, 8)");
  ids.ptr<int32_t>()[5] = 8;
  expect_error([&] { moe_router_backward(good); },
               "moe_router_backward: expert_ids[2, 1] = 8 is outside [0, experts = 8)");
  ids.ptr<int32_t>()[5] = -1;
  expect_error([&] { moe_router_backward(good); }, "expert_ids[2, 1] = -1 is outside");
}

}  // namespace
}  // namespace lathe
