// gpt_oss_ops: each forward against an independent float64 definition (attention with sinks as an
// explicit softmax over the scores plus the sink column), the f64 backward against finite
// differences, and the f32 path against the f64 one. Also attention and attention_with_sinks with
// a value width of their own (MLA).
#include "lathe/autograd/gpt_oss_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "autograd_op_checks.h"
#include "lathe/autograd/ops.h"
#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

// eager_attention_forward of transformers (modeling_gpt_oss.py) in f64: explicit scores, mask, a sink
// column per head, softmax, the sink dropped, times v.
Tensor naive_sink_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& sinks, int64_t window) {
  const int64_t batch = q.dim(0), seq = q.dim(1), heads = q.dim(2), head_dim = q.dim(3), kv_heads = k.dim(2);
  Tensor out = Tensor::zeros(q.shape(), DType::f64);
  // The flash op takes its scale as a float (FlashAttentionOptions::scale), so the definition does too.
  const double scale = attention_scale(FlashAttentionOptions{}, head_dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kvh = h / (heads / kv_heads);
      for (int64_t i = 0; i < seq; ++i) {
        std::vector<double> weights;
        double sum = std::exp(read_element(sinks, h));
        for (int64_t j = 0; j <= i; ++j) {
          double score = 0;
          for (int64_t d = 0; d < head_dim; ++d)
            score += q.ptr<double>()[((b * seq + i) * heads + h) * head_dim + d] *
                     k.ptr<double>()[((b * seq + j) * kv_heads + kvh) * head_dim + d];
          const bool visible = window == 0 || i - j < window;
          weights.push_back(visible ? std::exp(score * scale) : 0.0);
          sum += weights.back();
        }
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t d = 0; d < head_dim; ++d)
            out.ptr<double>()[((b * seq + i) * heads + h) * head_dim + d] +=
                weights[j] / sum * v.ptr<double>()[((b * seq + j) * kv_heads + kvh) * head_dim + d];
      }
    }
  return out;
}

TEST(AttentionWithSinks, MatchesExplicitSoftmaxWithSinkColumn) {
  const uint64_t seed = test_seed();
  for (int64_t window : {0, 3}) {
    const Tensor q = random({2, 7, 4, 6}, seed, 1), k = random({2, 7, 2, 6}, seed, 2),
                 v = random({2, 7, 2, 6}, seed, 3);
    const Tensor sinks = random({4}, seed, 4);
    FlashAttentionOptions options;
    options.causal = true;
    options.window = window;
    const Tensor expected = naive_sink_attention(q, k, v, sinks, window);
    for (Precision precision : {Precision::reference_f64, Precision::fast}) {
      const DType dtype = precision == Precision::fast ? DType::f32 : DType::f64;
      Tape tape(precision, false);
      Var out = attention_with_sinks(tape, make_var(convert(q, dtype)), make_var(convert(k, dtype)),
                                     make_var(convert(v, dtype)), make_var(convert(sinks, dtype)), options);
      const double tolerance = precision == Precision::fast ? 1e-5 : 1e-12;
      for (int64_t i = 0; i < expected.numel(); ++i)
        ASSERT_NEAR(read_element(out->value, i), expected.ptr<double>()[i], tolerance)
            << "window " << window << " element " << i << " seed " << seed;
    }
  }
}

TEST(AttentionWithSinks, ReferenceGradientsMatchFiniteDifferences) {
  const uint64_t seed = test_seed();
  FlashAttentionOptions options;
  options.causal = true;
  options.window = 3;
  auto op = [&](Tape& tape, const std::vector<Var>& in) {
    return attention_with_sinks(tape, in[0], in[1], in[2], in[3], options);
  };
  check_finite_differences({random({1, 5, 4, 4}, seed, 1), random({1, 5, 2, 4}, seed, 2), random({1, 5, 2, 4}, seed, 3),
                            random({4}, seed, 4)},
                           random({1, 5, 4, 4}, seed, 5), op, seed);
}

TEST(AttentionWithSinks, FastMatchesReference) {
  const uint64_t seed = test_seed();
  FlashAttentionOptions options;
  options.causal = true;
  auto op = [&](Tape& tape, const std::vector<Var>& in) {
    return attention_with_sinks(tape, in[0], in[1], in[2], in[3], options);
  };
  check_fast_matches_reference({random({2, 9, 4, 8}, seed, 1), random({2, 9, 2, 8}, seed, 2),
                                random({2, 9, 2, 8}, seed, 3), random({4}, seed, 4)},
                               {2, 9, 4, 8}, op, seed, 2e-5);
}

// MLA: v has a width of its own (3 and 5 against q/k's 4); the output takes v's width, and the
// gradients of attention and attention_with_sinks still match finite differences and the f32 path.
TEST(AttentionValueWidth, GradientsMatchFiniteDifferencesAndFastPath) {
  const uint64_t seed = test_seed();
  FlashAttentionOptions options;
  options.causal = true;
  auto plain = [&](Tape& tape, const std::vector<Var>& in) { return attention(tape, in[0], in[1], in[2], options); };
  auto sinks = [&](Tape& tape, const std::vector<Var>& in) {
    return attention_with_sinks(tape, in[0], in[1], in[2], in[3], options);
  };
  for (int64_t v_dim : {3, 5}) {
    const Tensor q = random({1, 5, 4, 4}, seed, 1), k = random({1, 5, 2, 4}, seed, 2),
                 v = random({1, 5, 2, v_dim}, seed, 3), sink = random({4}, seed, 4);
    const Tensor probe = random({1, 5, 4, v_dim}, seed, 5);
    {
      SCOPED_TRACE(str_cat("attention fd v_dim=", v_dim));
      check_finite_differences({q, k, v}, probe, plain, seed);
    }
    {
      SCOPED_TRACE(str_cat("sinks fd v_dim=", v_dim));
      check_finite_differences({q, k, v, sink}, probe, sinks, seed);
    }
    {
      SCOPED_TRACE(str_cat("attention fast v_dim=", v_dim));
      check_fast_matches_reference({q, k, v}, {1, 5, 4, v_dim}, plain, seed, 2e-5);
    }
    {
      SCOPED_TRACE(str_cat("sinks fast v_dim=", v_dim));
      check_fast_matches_reference({q, k, v, sink}, {1, 5, 4, v_dim}, sinks, seed, 2e-5);
    }
  }
}

TEST(ClampedSwiglu, ForwardMatchesDefinitionOnInterleavedColumns) {
  const uint64_t seed = test_seed();
  const double alpha = 1.702, limit = 1.5;
  const Tensor x = random({5, 8}, seed, 1, 2.0);  // std 2: many values beyond the limit on both sides
  Tape tape(Precision::reference_f64, false);
  Var out = clamped_swiglu(tape, make_var(x), alpha, limit);
  ASSERT_EQ(out->value.shape(), Shape({5, 4}));
  int clamped = 0;
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t j = 0; j < 4; ++j) {
      const double gate = x.ptr<double>()[r * 8 + 2 * j], up = x.ptr<double>()[r * 8 + 2 * j + 1];
      clamped += (gate > limit) + (std::fabs(up) > limit);
      const double g = gate > limit ? limit : gate, u = up > limit ? limit : up < -limit ? -limit : up;
      EXPECT_NEAR(out->value.ptr<double>()[r * 4 + j], (u + 1) * g / (1 + std::exp(-alpha * g)), 1e-14);
    }
  EXPECT_GT(clamped, 0) << "seed " << seed << ": no value reached a clamp";
}

TEST(ClampedSwiglu, ReferenceGradientsMatchFiniteDifferences) {
  const uint64_t seed = test_seed();
  auto op = [](Tape& tape, const std::vector<Var>& in) { return clamped_swiglu(tape, in[0], 1.702, 1.5); };
  check_finite_differences({random({4, 10}, seed, 1, 2.0)}, random({4, 5}, seed, 2), op, seed);
}

TEST(ClampedSwiglu, FastMatchesReference) {
  const uint64_t seed = test_seed();
  auto op = [](Tape& tape, const std::vector<Var>& in) { return clamped_swiglu(tape, in[0], 1.702, 7.0); };
  check_fast_matches_reference({random({33, 18}, seed, 1, 5.0)}, {33, 9}, op, seed, 1e-4);
}

Tensor offsets(std::vector<int64_t> values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i64);
  for (size_t i = 0; i < values.size(); ++i) t.ptr<int64_t>()[i] = values[i];
  return t;
}

TEST(GroupedAddBias, ForwardAddsEachGroupsExpertBias) {
  const uint64_t seed = test_seed();
  const Tensor x = random({6, 3}, seed, 1), bias = random({4, 3}, seed, 2);
  const Tensor groups = offsets({0, 2, 2, 5, 6});  // expert 1 empty
  const int64_t expert_of_row[] = {0, 0, 2, 2, 2, 3};
  Tape tape(Precision::reference_f64, false);
  Var out = grouped_add_bias(tape, make_var(x), make_var(bias), row_experts(groups));
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(out->value.ptr<double>()[r * 3 + i],
                x.ptr<double>()[r * 3 + i] + bias.ptr<double>()[expert_of_row[r] * 3 + i]);
}

TEST(GroupedAddBias, ReferenceGradientsMatchFiniteDifferences) {
  const uint64_t seed = test_seed();
  const Tensor groups = offsets({0, 2, 2, 5, 6});
  auto op = [&](Tape& tape, const std::vector<Var>& in) {
    return grouped_add_bias(tape, in[0], in[1], row_experts(groups));
  };
  check_finite_differences({random({6, 3}, seed, 1), random({4, 3}, seed, 2)}, random({6, 3}, seed, 3), op, seed);
}

TEST(GroupedAddBias, FastMatchesReference) {
  const uint64_t seed = test_seed();
  const Tensor groups = offsets({0, 7, 7, 20, 31});
  auto op = [&](Tape& tape, const std::vector<Var>& in) {
    return grouped_add_bias(tape, in[0], in[1], row_experts(groups));
  };
  check_fast_matches_reference({random({31, 5}, seed, 1), random({4, 5}, seed, 2)}, {31, 5}, op, seed, 1e-5);
}

}  // namespace
}  // namespace lathe::autograd
