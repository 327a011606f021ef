// MoE permute: a hand-worked routing (offsets, source, destination reasoned out on paper), the
// backward as the adjoint of the forward, thread-count independence of the layout, the draws'
// edge patterns, and argument validation. The generic contract tests (tests/unit) compare every
// implementation and config with the float64 reference on edge and random shapes.
#include "lathe/ops/moe_permute/moe_permute.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "expect_error.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
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

Tensor make_ids(int64_t tokens, int64_t top_k, std::initializer_list<int32_t> values) {
  Tensor ids = Tensor::empty({tokens, top_k}, DType::i32);
  EXPECT_EQ(static_cast<int64_t>(values.size()), tokens * top_k);
  std::memcpy(ids.ptr<int32_t>(), values.begin(), sizeof(int32_t) * values.size());
  return ids;
}

// The outputs of one forward call.
struct Permutation {
  Tensor permuted, offsets, source, destination;
  Permutation(int64_t slots, int64_t d, int64_t n_experts, DType dtype)
      : permuted(Tensor::empty({slots, d}, dtype)),
        offsets(Tensor::empty({n_experts + 1}, DType::i64)),
        source(Tensor::empty({slots}, DType::i32)),
        destination(Tensor::empty({slots}, DType::i32)) {
    poison(permuted), poison(offsets), poison(source), poison(destination);
  }
  MoePermuteArgs args(const Tensor& x, const Tensor& ids, int64_t n_experts) const {
    return {x, ids, n_experts, permuted, offsets, source, destination};
  }
};

template <class T>
std::vector<T> values(const Tensor& tensor) {
  return to_vector<T>(tensor.view());
}

// 4 tokens, top-2, 5 experts. Slots s = 2t + k pick experts
//   s: 0 1 2 3 4 5 6 7
//   e: 2 0 0 1 2 4 0 2
// Counts per expert 3, 1, 3, 0, 1 -> offsets 0 3 4 7 7 8. In slot order: expert 0 holds slots
// 1, 2, 6 (rows 0-2), expert 1 slot 3 (row 3), expert 2 slots 0, 4, 7 (rows 4-6), expert 3
// nothing, expert 4 slot 5 (row 7). So source = 1 2 6 3 0 4 7 5, and reading it backwards
// destination = 4 0 1 3 5 7 2 6; permuted row r is x's row source[r] / 2 = 0 1 3 1 0 2 3 2.
TEST(MoePermuteTest, HandWorkedRoutingOnEveryImplAndDtype) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 4, top_k = 2, n_experts = 5, d = 37;
  Tensor ids = make_ids(tokens, top_k, {2, 0, 0, 1, 2, 4, 0, 2});
  const std::vector<int64_t> offsets = {0, 3, 4, 7, 7, 8};
  const std::vector<int64_t> source = {1, 2, 6, 3, 0, 4, 7, 5}, destination = {4, 0, 1, 3, 5, 7, 2, 6};
  const std::vector<int64_t> row_token = {0, 1, 3, 1, 0, 2, 3, 2};
  for (DType dtype : {DType::f32, DType::bf16}) {
    Tensor x = Tensor::empty({tokens, d}, dtype);
    fill_uniform(x, seed, -2, 2);
    const int64_t row_bytes = d * static_cast<int64_t>(dtype_size(dtype));
    for (const std::string& impl : usable_impls()) {
      Permutation out(tokens * top_k, d, n_experts, dtype);
      Dispatch dispatch;
      dispatch.impl = impl;
      moe_permute(out.args(x, ids, n_experts), dispatch);
      const std::string where = impl + " " + dtype_name(dtype) + " seed=" + std::to_string(seed);
      EXPECT_EQ(values<int64_t>(out.offsets), offsets) << where;
      EXPECT_EQ(values<int64_t>(out.source), source) << where;
      EXPECT_EQ(values<int64_t>(out.destination), destination) << where;
      for (int64_t r = 0; r < tokens * top_k; ++r)
        EXPECT_EQ(std::memcmp(static_cast<const char*>(out.permuted.view().data) + r * row_bytes,
                              static_cast<const char*>(x.view().data) + row_token[r] * row_bytes, row_bytes),
                  0)
            << where << " row " << r;
    }
    // The float64 reference agrees with the hand-worked answer too.
    Permutation reference(tokens * top_k, d, n_experts, dtype);
    moe_permute_reference<double>(reference.args(x, ids, n_experts));
    EXPECT_EQ(values<int64_t>(reference.offsets), offsets);
    EXPECT_EQ(values<int64_t>(reference.source), source);
    EXPECT_EQ(values<int64_t>(reference.destination), destination);
  }
}

// <permute(x), g> = <x, permute_backward(g)> for every x and g: the backward is the adjoint.
// Checked exactly in float64 on the reference (integer-valued data, so every sum is exact), then
// every fast backward against the float64 reference backward, with and without accumulation.
TEST(MoePermuteTest, BackwardIsTheAdjointOfTheForward) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 23, d = 19;
  for (int64_t top_k : {1, 3}) {
    const int64_t n_experts = 6, slots = tokens * top_k;
    ExpertDraw draw{tokens, top_k, n_experts, "zipf", 1.5};
    Tensor ids = draw_expert_ids(draw, seed);
    Tensor x = Tensor::empty({tokens, d}, DType::f64), g = Tensor::empty({slots, d}, DType::f64);
    fill_uniform(x, seed, -50, 50, 1);
    fill_uniform(g, seed, -50, 50, 2);
    for (double* p = x.ptr<double>(); p != x.ptr<double>() + x.numel(); ++p) *p = std::floor(*p);
    for (double* p = g.ptr<double>(); p != g.ptr<double>() + g.numel(); ++p) *p = std::floor(*p);
    Permutation forward(slots, d, n_experts, DType::f64);
    moe_permute_reference<double>(forward.args(x, ids, n_experts));
    Tensor dx = Tensor::empty({tokens, d}, DType::f64);
    moe_permute_backward_reference<double>({g, forward.destination, top_k, dx, false});
    double left = 0, right = 0;
    for (int64_t i = 0; i < slots * d; ++i) left += forward.permuted.ptr<double>()[i] * g.ptr<double>()[i];
    for (int64_t i = 0; i < tokens * d; ++i) right += x.ptr<double>()[i] * dx.ptr<double>()[i];
    EXPECT_EQ(left, right) << "top_k=" << top_k << " seed=" << seed;
    EXPECT_NE(left, 0.0);

    Tensor g32 = convert(g, DType::f32), initial = Tensor::empty({tokens, d}, DType::f32);
    fill_uniform(initial, seed, -1, 1, 3);
    for (bool accumulate : {false, true}) {
      Tensor expected = Tensor::empty({tokens, d}, DType::f64);
      if (accumulate) write_from_vector(expected.view(), values<double>(initial));
      moe_permute_backward_reference<double>({g32, forward.destination, top_k, expected, accumulate});
      for (const std::string& impl : usable_impls()) {
        Tensor got = accumulate ? convert(initial, DType::f32) : Tensor::empty({tokens, d}, DType::f32);
        if (!accumulate) poison(got);
        Dispatch dispatch;
        dispatch.impl = impl;
        moe_permute_backward({g32, forward.destination, top_k, got, accumulate}, dispatch);
        // Integer-valued gradients plus an initial dx with 24-bit mantissas: within float rounding.
        for (int64_t i = 0; i < tokens * d; ++i)
          EXPECT_NEAR(got.ptr<float>()[i], expected.ptr<double>()[i], 1e-4)
              << impl << " top_k=" << top_k << " accumulate=" << accumulate << " i=" << i << " seed=" << seed;
      }
    }
  }
}

TEST(MoePermuteTest, LayoutAndRowsAreIdenticalForEveryThreadCountAndConfig) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 300, top_k = 8, n_experts = 64, d = 40, slots = tokens * top_k;
  Tensor ids = draw_expert_ids({tokens, top_k, n_experts, "zipf", 1.2}, seed);
  Tensor x = Tensor::empty({tokens, d}, DType::bf16);
  fill_uniform(x, seed, -1, 1, 1);
  const int original_threads = num_threads();
  set_num_threads(1);
  Permutation first(slots, d, n_experts, DType::bf16);
  moe_permute(first.args(x, ids, n_experts));
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    for (int64_t rows : {1, 64}) {
      for (int64_t streaming : {0, 1}) {
        ConfigParams config;
        config.set("rows_per_task", rows);
        config.set("streaming", streaming);
        Dispatch dispatch;
        dispatch.config = &config;
        Permutation out(slots, d, n_experts, DType::bf16);
        moe_permute(out.args(x, ids, n_experts), dispatch);
        const std::string where =
            str_cat("threads=", threads, " rows=", rows, " streaming=", streaming, " seed=", seed);
        EXPECT_EQ(values<int64_t>(out.offsets), values<int64_t>(first.offsets)) << where;
        EXPECT_EQ(values<int64_t>(out.source), values<int64_t>(first.source)) << where;
        EXPECT_EQ(values<int64_t>(out.destination), values<int64_t>(first.destination)) << where;
        EXPECT_EQ(std::memcmp(out.permuted.view().data, first.permuted.view().data, slots * d * 2), 0) << where;
      }
    }
  }
  set_num_threads(original_threads);
}

// The edge patterns the problems rely on produce what their names promise.
TEST(MoePermuteTest, DrawPatternsGiveEmptySingleAndFullExperts) {
  const uint64_t seed = test_seed();
  auto offsets_of = [&](const ExpertDraw& draw) {
    Tensor ids = draw_expert_ids(draw, seed);
    Permutation out(draw.tokens * draw.top_k, 1, draw.n_experts, DType::f32);
    Tensor x = Tensor::zeros({draw.tokens, 1}, DType::f32);
    moe_permute(out.args(x, ids, draw.n_experts));
    return values<int64_t>(out.offsets);
  };
  // hot0 with top-1: expert 0 has every row, the others none.
  EXPECT_EQ(offsets_of({19, 1, 4, "hot0", 1.0}), (std::vector<int64_t>{0, 19, 19, 19, 19}));
  // round robin over more experts than slots: one row each for the first 10, then none.
  EXPECT_EQ(offsets_of({5, 2, 13, "round_robin", 1.0}),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10}));
  // zipf picks distinct experts per token.
  Tensor ids = draw_expert_ids({50, 8, 64, "zipf", 1.0}, seed);
  for (int64_t t = 0; t < 50; ++t)
    for (int64_t a = 0; a < 8; ++a)
      for (int64_t b = a + 1; b < 8; ++b)
        EXPECT_NE(ids.ptr<int32_t>()[t * 8 + a], ids.ptr<int32_t>()[t * 8 + b]) << "token " << t << " seed=" << seed;
  // Strong skew leaves some of 64 experts empty with 40 tokens top-8.
  std::vector<int64_t> skewed = offsets_of({40, 8, 64, "zipf", 2.5});
  int64_t empty = 0;
  for (int64_t e = 0; e < 64; ++e) empty += skewed[e + 1] == skewed[e];
  EXPECT_GT(empty, 0) << "seed=" << seed;
}

TEST(MoePermuteTest, RejectsOutOfRangeExpertIdsAndMisshapedArguments) {
  const int64_t tokens = 3, top_k = 2, n_experts = 5, d = 4;
  Tensor x = Tensor::zeros({tokens, d}, DType::f32);
  Permutation out(tokens * top_k, d, n_experts, DType::f32);
  Tensor good = make_ids(tokens, top_k, {0, 4, 1, 2, 3, 0});
  EXPECT_NO_THROW(moe_permute(out.args(x, good, n_experts)));
  Tensor too_large = make_ids(tokens, top_k, {0, 4, 1, 2, 3, 5}),
         negative = make_ids(tokens, top_k, {0, 1, -1, 2, 9, 0});
  expect_error([&] { moe_permute(out.args(x, too_large, n_experts)); }, "expert_ids[2, 1] = 5 is out of range [0, 5)");
  expect_error([&] { moe_permute(out.args(x, negative, n_experts)); }, "expert_ids[1, 0] = -1 is out of range");
  // The kernel, called past validation, re-checks the ids and writes no row or index.
  Permutation untouched(tokens * top_k, d, n_experts, DType::f32);
  moe_permute_op().run(untouched.args(x, too_large, n_experts), Dispatch{});
  for (double value : values<double>(untouched.permuted)) EXPECT_TRUE(std::isnan(value));
  for (int64_t value : values<int64_t>(untouched.source)) EXPECT_EQ(value, 0x5a);
  for (int64_t value : values<int64_t>(untouched.destination)) EXPECT_EQ(value, 0x5a);

  Tensor ids_i64 = Tensor::zeros({tokens, top_k}, DType::i64), x_i32 = Tensor::zeros({tokens, d}, DType::i32);
  Tensor short_ids = make_ids(2, top_k, {0, 1, 2, 3});
  expect_error([&] { moe_permute(out.args(x, ids_i64, n_experts)); }, "expert_ids");
  expect_error([&] { moe_permute(out.args(x_i32, good, n_experts)); }, "x");
  expect_error([&] { moe_permute(out.args(x, short_ids, n_experts)); }, "expert_ids has 2 rows");
  expect_error([&] { moe_permute(out.args(x, good, 0)); }, "n_experts");
  MoePermuteArgs bad = out.args(x, good, n_experts);
  Tensor bf16_permuted = Tensor::zeros({tokens * top_k, d}, DType::bf16),
         small_offsets = Tensor::zeros({5}, DType::i64);
  Tensor i64_source = Tensor::zeros({tokens * top_k}, DType::i64);
  bad.permuted = bf16_permuted;
  expect_error([&] { moe_permute(bad); }, "permuted");
  bad = out.args(x, good, n_experts);
  bad.group_offsets = small_offsets;
  expect_error([&] { moe_permute(bad); }, "group_offsets has shape (5), expected (6)");
  bad = out.args(x, good, n_experts);
  bad.source = i64_source;
  expect_error([&] { moe_permute(bad); }, "source");

  Tensor g = Tensor::zeros({tokens * top_k, d}, DType::f32), dx = Tensor::zeros({tokens, d}, DType::f32);
  Tensor destination = Tensor::empty({tokens * top_k}, DType::i32);
  for (int32_t s = 0; s < tokens * top_k; ++s) destination.ptr<int32_t>()[s] = s;
  EXPECT_NO_THROW(moe_permute_backward({g, destination, top_k, dx, false}));
  destination.ptr<int32_t>()[4] = 6;
  expect_error(
      [&] {
        moe_permute_backward({g, destination, top_k, dx, false});
      },
      "destination[4] = 6 is out of range [0, 6)");
  destination.ptr<int32_t>()[4] = 4;
  expect_error([&] { moe_permute_backward({g, destination, 3, dx, false}); }, "d_permuted");
  expect_error([&] { moe_permute_backward({g, destination, 0, dx, false}); }, "top_k");
}

}  // namespace
}  // namespace lathe
