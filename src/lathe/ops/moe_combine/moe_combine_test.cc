// MoE combine: finite-difference gradients of the reference, combine(permute(x)) with unit weights
// equals top_k * x on every implementation, optional backward outputs, thread-count independence,
// and argument validation. The generic contract tests (tests/unit) compare every implementation
// and config with the float64 reference on edge and random shapes.
#include "lathe/ops/moe_combine/moe_combine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "expect_error.h"
#include "finite_difference.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/moe_permute/moe_permute.h"
#include "lathe/ops/moe_permute/moe_routing_draw.h"
#include "test_seed.h"

namespace lathe {
namespace {

std::vector<std::string> usable_impls() {
  std::vector<std::string> impls;
  for (const char* impl : {"avx512", "avx2", "scalar"})
    if (isa_available(parse_isa(impl))) impls.push_back(impl);
  return impls;
}

Dispatch pinned(const std::string& impl) {
  Dispatch dispatch;
  dispatch.impl = impl;
  return dispatch;
}

TEST(MoeCombineTest, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 5, top_k = 2, n_experts = 3, n = 6, slots = tokens * top_k;
  Tensor ids = draw_expert_ids({tokens, top_k, n_experts, "zipf", 1.0}, seed);
  Tensor destination = permute_destination(ids, n_experts);
  Tensor expert_out = Tensor::empty({slots, n}, DType::f64), weights = Tensor::empty({tokens, top_k}, DType::f64);
  Tensor probe = Tensor::empty({tokens, n}, DType::f64);
  fill_uniform(expert_out, seed, -1, 1, 1);
  fill_uniform(weights, seed, 0, 1, 2);
  fill_uniform(probe, seed, -1, 1, 3);
  auto loss = [&] {
    Tensor y = Tensor::empty({tokens, n}, DType::f64);
    moe_combine_reference<double>({expert_out, weights, destination, y, false});
    double sum = 0;
    for (int64_t i = 0; i < y.numel(); ++i) sum += y.ptr<double>()[i] * probe.ptr<double>()[i];
    return sum;
  };
  Tensor d_expert_out = Tensor::empty({slots, n}, DType::f64), d_weights = Tensor::empty({tokens, top_k}, DType::f64);
  moe_combine_backward_reference<double>({expert_out, weights, destination, probe, d_expert_out, d_weights});
  expect_gradient_matches_finite_differences(expert_out, d_expert_out, loss, "d_expert_out", seed, 1e-6, 1e-7);
  expect_gradient_matches_finite_differences(weights, d_weights, loss, "d_weights", seed, 1e-6, 1e-7);
}

// Every slot's copy comes back to its own token: with unit weights the sum is top_k copies of x.
// x holds multiples of 1/64 in [-4, 4], so up to 8 copies sum exactly in float.
TEST(MoeCombineTest, CombineOfPermuteWithUnitWeightsIsTopKTimesX) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 45, d = 70;
  struct Routing {
    int64_t top_k, n_experts;
    const char* pattern;
  };
  for (Routing routing :
       {Routing{1, 4, "hot0"}, Routing{2, 8, "zipf"}, Routing{8, 64, "zipf"}, Routing{3, 2, "zipf"}}) {
    const int64_t top_k = routing.top_k, slots = tokens * top_k;
    Tensor ids = draw_expert_ids({tokens, top_k, routing.n_experts, routing.pattern, 1.5}, seed);
    Tensor x = Tensor::empty({tokens, d}, DType::f32);
    fill_uniform(x, seed, -256, 256, 1);
    for (float* p = x.ptr<float>(); p != x.ptr<float>() + x.numel(); ++p) *p = std::floor(*p) / 64;
    Tensor unit = Tensor::empty({tokens, top_k}, DType::f32);
    fill_value(unit, 1.0);
    for (const std::string& impl : usable_impls()) {
      Tensor permuted = Tensor::empty({slots, d}, DType::f32),
             offsets = Tensor::empty({routing.n_experts + 1}, DType::i64);
      Tensor source = Tensor::empty({slots}, DType::i32), destination = Tensor::empty({slots}, DType::i32);
      Tensor y = Tensor::empty({tokens, d}, DType::f32);
      poison(y);
      moe_permute({x, ids, routing.n_experts, permuted, offsets, source, destination}, pinned(impl));
      moe_combine({permuted, unit, destination, y, false}, pinned(impl));
      for (int64_t i = 0; i < tokens * d; ++i)
        ASSERT_EQ(y.ptr<float>()[i], static_cast<float>(top_k) * x.ptr<float>()[i])
            << impl << " top_k=" << top_k << " i=" << i << " seed=" << seed;
    }
  }
}

// accumulate adds the routed sum to what y holds (a shared expert's output): y0 + sum, and with
// weights that are powers of two and dyadic data every step is exact.
TEST(MoeCombineTest, AccumulateAddsToTheSharedExpertOutput) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 17, top_k = 2, n_experts = 4, n = 33, slots = tokens * top_k;
  Tensor ids = draw_expert_ids({tokens, top_k, n_experts, "zipf", 1.0}, seed);
  Tensor destination = permute_destination(ids, n_experts);
  Tensor expert_out = Tensor::empty({slots, n}, DType::f32), weights = Tensor::empty({tokens, top_k}, DType::f32);
  Tensor shared = Tensor::empty({tokens, n}, DType::f32);
  fill_uniform(expert_out, seed, -64, 64, 1);
  fill_uniform(shared, seed, -64, 64, 2);
  for (float* p = expert_out.ptr<float>(); p != expert_out.ptr<float>() + expert_out.numel(); ++p) *p = std::floor(*p);
  for (float* p = shared.ptr<float>(); p != shared.ptr<float>() + shared.numel(); ++p) *p = std::floor(*p);
  for (int64_t i = 0; i < tokens * top_k; ++i) weights.ptr<float>()[i] = (i % 3 == 0) ? 0.5f : 0.25f;
  for (const std::string& impl : usable_impls()) {
    Tensor plain = Tensor::empty({tokens, n}, DType::f32), y = convert(shared, DType::f32);
    moe_combine({expert_out, weights, destination, plain, false}, pinned(impl));
    moe_combine({expert_out, weights, destination, y, true}, pinned(impl));
    for (int64_t i = 0; i < tokens * n; ++i)
      ASSERT_EQ(y.ptr<float>()[i], shared.ptr<float>()[i] + plain.ptr<float>()[i]) << impl << " i=" << i;
  }
}

// Each backward output alone is what the full call computes, bitwise.
TEST(MoeCombineTest, BackwardOutputsAreOptional) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 29, top_k = 4, n_experts = 9, n = 50, slots = tokens * top_k;
  Tensor ids = draw_expert_ids({tokens, top_k, n_experts, "zipf", 1.0}, seed);
  Tensor destination = permute_destination(ids, n_experts);
  Tensor expert_out = Tensor::empty({slots, n}, DType::f32), weights = Tensor::empty({tokens, top_k}, DType::f32);
  Tensor dy = Tensor::empty({tokens, n}, DType::f32);
  fill_uniform(expert_out, seed, -1, 1, 1);
  fill_uniform(weights, seed, 0, 1, 2);
  fill_uniform(dy, seed, -1, 1, 3);
  for (const std::string& impl : usable_impls()) {
    Tensor d_expert_out = Tensor::empty({slots, n}, DType::f32), d_weights = Tensor::empty({tokens, top_k}, DType::f32);
    Tensor only_expert = Tensor::empty({slots, n}, DType::f32),
           only_weights = Tensor::empty({tokens, top_k}, DType::f32);
    poison(only_expert), poison(only_weights);
    moe_combine_backward({expert_out, weights, destination, dy, d_expert_out, d_weights}, pinned(impl));
    moe_combine_backward({expert_out, weights, destination, dy, only_expert, TensorView{}}, pinned(impl));
    moe_combine_backward({expert_out, weights, destination, dy, TensorView{}, only_weights}, pinned(impl));
    EXPECT_EQ(std::memcmp(d_expert_out.ptr<float>(), only_expert.ptr<float>(), sizeof(float) * slots * n), 0) << impl;
    EXPECT_EQ(std::memcmp(d_weights.ptr<float>(), only_weights.ptr<float>(), sizeof(float) * slots), 0) << impl;
  }
}

TEST(MoeCombineTest, ForwardAndBackwardAreIdenticalForEveryThreadCountAndConfig) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 200, top_k = 8, n_experts = 64, n = 72, slots = tokens * top_k;
  Tensor ids = draw_expert_ids({tokens, top_k, n_experts, "zipf", 1.0}, seed);
  Tensor destination = permute_destination(ids, n_experts);
  Tensor expert_out = Tensor::empty({slots, n}, DType::f32), weights = Tensor::empty({tokens, top_k}, DType::f32);
  Tensor dy = Tensor::empty({tokens, n}, DType::f32);
  fill_uniform(expert_out, seed, -1, 1, 1);
  fill_uniform(weights, seed, 0, 1, 2);
  fill_uniform(dy, seed, -1, 1, 3);
  const int original_threads = num_threads();
  set_num_threads(1);
  Tensor y0 = Tensor::empty({tokens, n}, DType::f32), de0 = Tensor::empty({slots, n}, DType::f32);
  Tensor dw0 = Tensor::empty({tokens, top_k}, DType::f32);
  moe_combine({expert_out, weights, destination, y0, false});
  moe_combine_backward({expert_out, weights, destination, dy, de0, dw0});
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    for (int64_t per_task : {1, 16}) {
      ConfigParams config;
      config.set("tokens_per_task", per_task);
      config.set("streaming", per_task == 16 ? 1 : 0);
      Dispatch dispatch;
      dispatch.config = &config;
      Tensor y = Tensor::empty({tokens, n}, DType::f32), de = Tensor::empty({slots, n}, DType::f32);
      Tensor dw = Tensor::empty({tokens, top_k}, DType::f32);
      poison(y), poison(de), poison(dw);
      moe_combine({expert_out, weights, destination, y, false}, dispatch);
      moe_combine_backward({expert_out, weights, destination, dy, de, dw}, dispatch);
      const std::string where = str_cat("threads=", threads, " tokens_per_task=", per_task, " seed=", seed);
      EXPECT_EQ(std::memcmp(y.ptr<float>(), y0.ptr<float>(), sizeof(float) * tokens * n), 0) << where;
      EXPECT_EQ(std::memcmp(de.ptr<float>(), de0.ptr<float>(), sizeof(float) * slots * n), 0) << where;
      EXPECT_EQ(std::memcmp(dw.ptr<float>(), dw0.ptr<float>(), sizeof(float) * slots), 0) << where;
    }
  }
  set_num_threads(original_threads);
}

TEST(MoeCombineTest, RejectsBadDestinationsAndMisshapedArguments) {
  const int64_t tokens = 3, top_k = 2, n = 4, slots = tokens * top_k;
  Tensor expert_out = Tensor::zeros({slots, n}, DType::f32), weights = Tensor::zeros({tokens, top_k}, DType::f32);
  Tensor y = Tensor::zeros({tokens, n}, DType::f32), dy = Tensor::zeros({tokens, n}, DType::f32);
  Tensor d_expert_out = Tensor::zeros({slots, n}, DType::f32), d_weights = Tensor::zeros({tokens, top_k}, DType::f32);
  Tensor destination = Tensor::empty({slots}, DType::i32);
  for (int32_t s = 0; s < slots; ++s) destination.ptr<int32_t>()[s] = static_cast<int32_t>(slots - 1 - s);
  EXPECT_NO_THROW(moe_combine({expert_out, weights, destination, y, false}));
  EXPECT_NO_THROW(moe_combine_backward({expert_out, weights, destination, dy, d_expert_out, d_weights}));

  destination.ptr<int32_t>()[2] = -3;
  expect_error(
      [&] {
        moe_combine({expert_out, weights, destination, y, false});
      },
      "moe_combine: destination[2] = -3 is out of range [0, 6)");
  expect_error(
      [&] {
        moe_combine_backward({expert_out, weights, destination, dy, d_expert_out, d_weights});
      },
      "moe_combine_backward: destination[2] = -3");
  destination.ptr<int32_t>()[2] = 3;

  Tensor short_expert_out = Tensor::zeros({slots - 1, n}, DType::f32),
         wide_y = Tensor::zeros({tokens, n + 1}, DType::f32);
  Tensor bf16_weights = Tensor::zeros({tokens, top_k}, DType::bf16),
         i64_destination = Tensor::zeros({slots}, DType::i64);
  Tensor wrong_d_weights = Tensor::zeros({tokens, top_k + 1}, DType::f32),
         wrong_dy = Tensor::zeros({tokens + 1, n}, DType::f32);
  expect_error([&] { moe_combine({short_expert_out, weights, destination, y, false}); }, "expert_out has 5 rows");
  expect_error(
      [&] {
        moe_combine({expert_out, weights, destination, wide_y, false});
      },
      "y has shape (3, 5), expected (3, 4)");
  expect_error([&] { moe_combine({expert_out, bf16_weights, destination, y, false}); }, "weights");
  expect_error([&] { moe_combine({expert_out, weights, i64_destination, y, false}); }, "destination");
  expect_error(
      [&] {
        moe_combine_backward({expert_out, weights, destination, wrong_dy, d_expert_out, d_weights});
      },
      "dy");
  expect_error(
      [&] {
        moe_combine_backward({expert_out, weights, destination, dy, d_expert_out, wrong_d_weights});
      },
      "d_weights");
  expect_error(
      [&] {
        moe_combine_backward({expert_out, weights, destination, dy, wide_y, d_weights});
      },
      "d_expert_out");
}

}  // namespace
}  // namespace lathe
