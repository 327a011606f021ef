// clamped_swiglu beyond the registered problem's contract tests: values worked out by hand, the
// clamps (no gradient past a bound), the reference backward against central differences of the
// reference forward in double, and validation errors.
#include "lathe/ops/clamped_swiglu/clamped_swiglu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/rng.h"
#include "tensor_values.h"
#include "test_seed.h"

namespace lathe {
namespace {

TEST(ClampedSwigluOp, MatchesHandComputedValuesAndClamps) {
  // Row 0: gate 1, up 0.5 -> 1.5 * 1 * sigmoid(1); row 1: gate 9 -> 7 and up -8 -> -7:
  // (-7 + 1) * 7 * sigmoid(7). alpha 1, limit 7.
  Tensor gate_up = f32_tensor({2, 2}, {1.0f, 0.5f, 9.0f, -8.0f});
  Tensor out = Tensor::empty({2, 1}, DType::f32);
  clamped_swiglu({gate_up, out, 1.0, 7.0});
  const std::vector<float> y = to_vector<float>(out);
  EXPECT_NEAR(y[0], 1.5 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(y[1], -42.0 / (1 + std::exp(-7.0)), 1e-5);

  Tensor dy = f32_tensor({2, 1}, {1.0f, 1.0f});
  Tensor dx = Tensor::empty({2, 2}, DType::f32);
  clamped_swiglu_backward({gate_up, dy, dx, 1.0, 7.0});
  const std::vector<float> g = to_vector<float>(dx);
  const double s = 1 / (1 + std::exp(-1.0));
  EXPECT_NEAR(g[0], 1.5 * (s + s * (1 - s)), 1e-6);  // d/dg (u + 1) g sigmoid(g) at g = 1, u = 0.5
  EXPECT_NEAR(g[1], s, 1e-6);                        // d/du: g sigmoid(g)
  EXPECT_EQ(g[2], 0.0f);                             // gate past the limit
  EXPECT_EQ(g[3], 0.0f);                             // up past -limit
}

TEST(ClampedSwigluOp, ReferenceBackwardMatchesCentralDifferences) {
  const int64_t rows = 3, ffn = 5;
  const double alpha = 1.702, limit = 7.0;
  const uint64_t seed = test_seed();
  std::vector<double> x(static_cast<size_t>(rows * 2 * ffn)), w(static_cast<size_t>(rows * ffn));
  // Values away from the clamps' kinks (|x| < 6 or 8 < |x| < 9), where the function is smooth.
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = 12 * uniform_at(seed, 0, i) - 6;
    x[i] = uniform_at(seed, 1, i) < 0.2 ? (v < 0 ? -8 + v / 6 : 8 + v / 6) : v;
  }
  for (size_t i = 0; i < w.size(); ++i) w[i] = 2 * uniform_at(seed, 2, i) - 1;
  auto loss = [&](const std::vector<double>& at) {  // sum of w * out, computed in double
    Tensor in = Tensor::empty({rows, 2 * ffn}, DType::f64), out = Tensor::empty({rows, ffn}, DType::f64);
    write_from_vector(in, at);
    clamped_swiglu_reference<double>({in, out, alpha, limit});
    double total = 0;
    const std::vector<double> y = to_vector<double>(out);
    for (size_t i = 0; i < y.size(); ++i) total += w[i] * y[i];
    return total;
  };
  Tensor in = Tensor::empty({rows, 2 * ffn}, DType::f64), dy = Tensor::empty({rows, ffn}, DType::f64);
  Tensor dx = Tensor::empty({rows, 2 * ffn}, DType::f64);
  write_from_vector(in, x);
  write_from_vector(dy, w);
  clamped_swiglu_backward_reference<double>({in, dy, dx, alpha, limit});
  const std::vector<double> analytic = to_vector<double>(dx);
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> plus = x, minus = x;
    plus[i] += h, minus[i] -= h;
    EXPECT_NEAR(analytic[i], (loss(plus) - loss(minus)) / (2 * h), 1e-7) << "element " << i;
  }
}

TEST(ClampedSwigluOp, RejectsBadArguments) {
  Tensor odd = Tensor::zeros({2, 3}, DType::f32), out = Tensor::empty({2, 1}, DType::f32);
  EXPECT_THROW(clamped_swiglu({odd, out}), Error);
  Tensor gate_up = Tensor::zeros({2, 4}, DType::f32), wrong = Tensor::empty({2, 4}, DType::f32);
  EXPECT_THROW(clamped_swiglu({gate_up, wrong}), Error);
  Tensor dy = Tensor::zeros({2, 2}, DType::f32), narrow = Tensor::empty({2, 2}, DType::f32);
  EXPECT_THROW(clamped_swiglu_backward({gate_up, dy, narrow}), Error);
}

}  // namespace
}  // namespace lathe
