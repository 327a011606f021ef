// attention_sinks beyond the registered problem's contract tests: values worked out by hand (a
// query with keys and one without), the reference backward against central differences of the
// reference forward in double, and validation errors.
#include "lathe/ops/attention_sinks/attention_sinks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lathe/core/rng.h"
#include "tensor_values.h"
#include "test_seed.h"

namespace lathe {
namespace {

TEST(AttentionSinks, MatchesHandComputedValues) {
  // batch 1, two queries, one head, v_dim 2; sink 0. Query 0: lse = log 3 -> lse_out = log 4, o
  // scaled by 3/4. Query 1 sees no key (lse = -inf): o_out = 0, lse_out = the sink.
  const float inf = std::numeric_limits<float>::infinity();
  Tensor o = f32_tensor({1, 2, 1, 2}, {2.0f, -4.0f, 5.0f, 6.0f});
  Tensor lse = f32_tensor({1, 1, 2}, {static_cast<float>(std::log(3.0)), -inf});
  Tensor sinks = f32_tensor({1}, {0.0f});
  Tensor o_out = Tensor::empty({1, 2, 1, 2}, DType::f32), lse_out = Tensor::empty({1, 1, 2}, DType::f32);
  attention_sinks({o, lse, sinks, o_out, lse_out});
  const std::vector<float> y = to_vector<float>(o_out), l = to_vector<float>(lse_out);
  EXPECT_NEAR(y[0], 1.5, 1e-6);
  EXPECT_NEAR(y[1], -3.0, 1e-6);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_NEAR(l[0], std::log(4.0), 1e-6);
  EXPECT_EQ(l[1], 0.0f);

  // d_sink = -(exp(0 - log 4) * (1 * 1.5 + 1 * -3) + exp(0 - 0) * 0) = 0.375.
  Tensor d_o = f32_tensor({1, 2, 1, 2}, {1.0f, 1.0f, 1.0f, 1.0f});
  Tensor d_sinks = Tensor::empty({1}, DType::f32);
  attention_sinks_backward({o_out, d_o, lse_out, sinks, d_sinks});
  EXPECT_NEAR(to_vector<float>(d_sinks)[0], 0.375, 1e-6);
}

TEST(AttentionSinks, ReferenceBackwardMatchesCentralDifferences) {
  const int64_t batch = 2, seq = 3, heads = 2, v_dim = 4;
  const uint64_t seed = test_seed();
  auto filled = [&](const Shape& shape, uint64_t stream, double low, double high) {
    Tensor t = Tensor::empty(shape, DType::f64);
    fill_uniform(t, seed, low, high, stream);
    return t;
  };
  const Tensor o = filled({batch, seq, heads, v_dim}, 0, -1, 1), lse = filled({batch, heads, seq}, 1, -2, 2);
  const Tensor w = filled({batch, seq, heads, v_dim}, 2, -1, 1), sinks = filled({heads}, 3, -1, 1);
  auto loss = [&](const std::vector<double>& sink_values) {  // sum of w * o_out
    Tensor s = Tensor::empty({heads}, DType::f64), o_out = Tensor::empty(o.shape(), DType::f64);
    Tensor lse_out = Tensor::empty(lse.shape(), DType::f64);
    write_from_vector(s, sink_values);
    attention_sinks_reference<double>({o, lse, s, o_out, lse_out});
    const std::vector<double> y = to_vector<double>(o_out), weights = to_vector<double>(w);
    double total = 0;
    for (size_t i = 0; i < y.size(); ++i) total += weights[i] * y[i];
    return total;
  };
  Tensor o_out = Tensor::empty(o.shape(), DType::f64), lse_out = Tensor::empty(lse.shape(), DType::f64);
  attention_sinks_reference<double>({o, lse, sinks, o_out, lse_out});
  Tensor d_sinks = Tensor::empty({heads}, DType::f64);
  attention_sinks_backward_reference<double>({o_out, w, lse_out, sinks, d_sinks});
  const std::vector<double> analytic = to_vector<double>(d_sinks), s = to_vector<double>(sinks);
  const double h = 1e-6;
  for (int64_t head = 0; head < heads; ++head) {
    std::vector<double> plus = s, minus = s;
    plus[head] += h, minus[head] -= h;
    EXPECT_NEAR(analytic[head], (loss(plus) - loss(minus)) / (2 * h), 1e-7) << "head " << head;
  }
}

TEST(AttentionSinks, RejectsBadArguments) {
  Tensor o = Tensor::zeros({1, 2, 3, 4}, DType::f32), lse = Tensor::zeros({1, 3, 2}, DType::f32);
  Tensor sinks = Tensor::zeros({3}, DType::f32), o_out = Tensor::empty({1, 2, 3, 4}, DType::f32);
  Tensor lse_out = Tensor::empty({1, 3, 2}, DType::f32);
  Tensor transposed_lse = Tensor::zeros({1, 2, 3}, DType::f32), few_sinks = Tensor::zeros({2}, DType::f32);
  EXPECT_NO_THROW(attention_sinks({o, lse, sinks, o_out, lse_out}));
  EXPECT_THROW(attention_sinks({o, transposed_lse, sinks, o_out, lse_out}), Error);
  EXPECT_THROW(attention_sinks({o, lse, few_sinks, o_out, lse_out}), Error);
  Tensor d_sinks = Tensor::empty({2}, DType::f32);
  EXPECT_THROW(attention_sinks_backward({o_out, o, lse, sinks, d_sinks}), Error);
}

}  // namespace
}  // namespace lathe
