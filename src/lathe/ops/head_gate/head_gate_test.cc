// head_gate beyond the registered problem's contract tests: values worked out by hand for each
// activation and the clamp, the reference backward against central differences of the reference
// forward in double, and validation errors.
#include "lathe/ops/head_gate/head_gate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/rng.h"
#include "tensor_values.h"
#include "test_seed.h"

namespace lathe {
namespace {

constexpr double kLn2 = 0.69314718055994530942;

// Qwen3-Next's g: a_log = (0, ln 2), so scale = (-1, -2); with bias (0, -1), x's rows (0, 1) and
// (0.5, 1) give u = (0, 0) and (0.5, 0): out = scale * softplus(u), softplus(0) = ln 2, and
// d/du softplus(0) = sigmoid(0) = 1/2.
TEST(HeadGateOp, DecayGateMatchesHandComputedValues) {
  const Tensor x = f32_tensor({2, 2}, {0.0f, 1.0f, 0.5f, 1.0f});
  const Tensor bias = f32_tensor({2}, {0.0f, -1.0f});
  const Tensor a_log = f32_tensor({2}, {0.0f, static_cast<float>(kLn2)});
  Tensor out = Tensor::empty({2, 2}, DType::f32);
  HeadGateArgs args{x, bias, a_log, out};
  head_gate(args);
  const std::vector<float> o = to_vector<float>(out);
  EXPECT_NEAR(o[0], -kLn2, 1e-6);
  EXPECT_NEAR(o[1], -2 * kLn2, 1e-6);
  EXPECT_NEAR(o[2], -std::log1p(std::exp(0.5)), 1e-6);
  EXPECT_NEAR(o[3], -2 * kLn2, 1e-6);

  // The backward where every u is 0: x's rows (0, 1) and (0, 1).
  const Tensor x0 = f32_tensor({2, 2}, {0.0f, 1.0f, 0.0f, 1.0f}), dout = f32_tensor({2, 2}, {1.0f, 1.0f, 1.0f, 3.0f});
  Tensor dx = Tensor::empty({2, 2}, DType::f32), dbias = Tensor::empty({2}, DType::f32);
  Tensor d_a_log = Tensor::empty({2}, DType::f32);
  head_gate_backward({x0, bias, a_log, dout, dx, dbias, d_a_log});
  // dx = dout * scale * 1/2: (-0.5, -1, -0.5, -3); dbias sums the rows; d_a_log = sum dout * out.
  EXPECT_EQ(to_vector<float>(dx), (std::vector<float>{-0.5f, -1.0f, -0.5f, -3.0f}));
  EXPECT_EQ(to_vector<float>(dbias), (std::vector<float>{-1.0f, -4.0f}));
  const std::vector<float> da = to_vector<float>(d_a_log);
  EXPECT_NEAR(da[0], -2 * kLn2, 1e-6);
  EXPECT_NEAR(da[1], -8 * kLn2, 1e-5);
}

// Mamba-2's clamped step size: softplus(-10) = 4.54e-5 below lower = 0.001 (held there, gradient
// 0); softplus(-3) = 0.04859 inside (gradient sigmoid(-3) = 0.04743); softplus(0) = ln 2 above
// upper = 0.1 (held, gradient 0); softplus(30) = 30 (the linear branch) above it too.
TEST(HeadGateOp, ClampedSoftplusHoldsTheBoundsAndPassesNoGradientThere) {
  const Tensor x = f32_tensor({1, 4}, {-10.0f, -3.0f, 0.0f, 30.0f});
  Tensor out = Tensor::empty({1, 4}, DType::f32);
  HeadGateArgs args{x, {}, {}, out, HeadGateActivation::softplus, 0.001, 0.1};
  head_gate(args);
  const std::vector<float> o = to_vector<float>(out);
  EXPECT_FLOAT_EQ(o[0], 0.001f);
  EXPECT_NEAR(o[1], std::log1p(std::exp(-3.0)), 1e-7);
  EXPECT_FLOAT_EQ(o[2], 0.1f);
  EXPECT_FLOAT_EQ(o[3], 0.1f);
  const Tensor dout = f32_tensor({1, 4}, {1.0f, 2.0f, 1.0f, 1.0f});
  Tensor dx = Tensor::empty({1, 4}, DType::f32);
  head_gate_backward({x, {}, {}, dout, dx, {}, {}, HeadGateActivation::softplus, 0.001, 0.1});
  const std::vector<float> d = to_vector<float>(dx);
  EXPECT_EQ(d[0], 0.0f);
  EXPECT_NEAR(d[1], 2 / (1 + std::exp(3.0)), 1e-7);
  EXPECT_EQ(d[2], 0.0f);
  EXPECT_EQ(d[3], 0.0f);
}

// Qwen3-Next's beta = sigmoid(b) and Mamba-2's A = -exp(A_log).
TEST(HeadGateOp, SigmoidAndNegativeExpMatchTheirDefinitions) {
  const Tensor x = f32_tensor({1, 3}, {0.0f, static_cast<float>(kLn2), -1.0f});
  Tensor out = Tensor::empty({1, 3}, DType::f32), dx = Tensor::empty({1, 3}, DType::f32);
  const Tensor dout = f32_tensor({1, 3}, {1.0f, 1.0f, 1.0f});
  head_gate({x, {}, {}, out, HeadGateActivation::sigmoid});
  EXPECT_NEAR(to_vector<float>(out)[0], 0.5, 1e-7);
  EXPECT_NEAR(to_vector<float>(out)[1], 2.0 / 3.0, 1e-7);  // 1 / (1 + 1/2)
  head_gate_backward({x, {}, {}, dout, dx, {}, {}, HeadGateActivation::sigmoid});
  EXPECT_NEAR(to_vector<float>(dx)[0], 0.25, 1e-7);
  EXPECT_NEAR(to_vector<float>(dx)[1], 2.0 / 9.0, 1e-7);  // (2/3)(1/3)
  head_gate({x, {}, {}, out, HeadGateActivation::negative_exp});
  EXPECT_EQ(to_vector<float>(out)[0], -1.0f);
  EXPECT_NEAR(to_vector<float>(out)[1], -2.0, 1e-6);
  EXPECT_NEAR(to_vector<float>(out)[2], -std::exp(-1.0), 1e-7);
  head_gate_backward({x, {}, {}, dout, dx, {}, {}, HeadGateActivation::negative_exp});
  EXPECT_EQ(to_vector<float>(dx), to_vector<float>(out));  // d(-e^u)/du = -e^u
}

TEST(HeadGateOp, ReferenceBackwardMatchesCentralDifferences) {
  const int64_t rows = 3, heads = 4;
  const uint64_t seed = test_seed();
  auto values = [&](int64_t stream, size_t n, double low, double high) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = low + (high - low) * uniform_at(seed, stream, i);
    return v;
  };
  const size_t n = static_cast<size_t>(rows * heads);
  const std::vector<double> x0 = values(0, n, -3, 3), bias0 = values(1, heads, -1, 1);
  const std::vector<double> a_log0 = values(2, heads, -1, 1), dout = values(3, n, -1, 1);
  auto tensor = [](const std::vector<double>& v, Shape shape) {
    Tensor t = Tensor::empty(shape, DType::f64);
    write_from_vector(t, v);
    return t;
  };
  for (HeadGateActivation act :
       {HeadGateActivation::softplus, HeadGateActivation::sigmoid, HeadGateActivation::negative_exp}) {
    auto loss = [&](const std::vector<double>& x, const std::vector<double>& bias, const std::vector<double>& a_log) {
      const Tensor tx = tensor(x, {rows, heads}), tbias = tensor(bias, {heads}), ta_log = tensor(a_log, {heads});
      Tensor out = Tensor::empty({rows, heads}, DType::f64);
      head_gate_reference<double>({tx, tbias, ta_log, out, act});
      const std::vector<double> o = to_vector<double>(out);
      double total = 0;
      for (size_t i = 0; i < o.size(); ++i) total += dout[i] * o[i];
      return total;
    };
    Tensor dx = Tensor::empty({rows, heads}, DType::f64), dbias = Tensor::empty({heads}, DType::f64);
    Tensor d_a_log = Tensor::empty({heads}, DType::f64);
    const Tensor tx = tensor(x0, {rows, heads}), tbias = tensor(bias0, {heads}), ta_log = tensor(a_log0, {heads});
    const Tensor tdout = tensor(dout, {rows, heads});
    head_gate_backward_reference<double>({tx, tbias, ta_log, tdout, dx, dbias, d_a_log, act});
    const double h = 1e-6;
    auto check = [&](const std::vector<double>& analytic, int which, const char* name) {
      for (size_t i = 0; i < analytic.size(); ++i) {
        std::vector<double> plus[3] = {x0, bias0, a_log0}, minus[3] = {x0, bias0, a_log0};
        plus[which][i] += h, minus[which][i] -= h;
        const double numeric = (loss(plus[0], plus[1], plus[2]) - loss(minus[0], minus[1], minus[2])) / (2 * h);
        EXPECT_NEAR(analytic[i], numeric, 1e-6 * (1 + std::fabs(numeric)))
            << name << " element " << i << " act " << head_gate_activation_name(act) << " seed=" << seed;
      }
    };
    check(to_vector<double>(dx), 0, "dx");
    check(to_vector<double>(dbias), 1, "dbias");
    check(to_vector<double>(d_a_log), 2, "d_a_log");
  }
}

TEST(HeadGateOp, RejectsBadArguments) {
  Tensor x = Tensor::zeros({2, 3}, DType::f32), out = Tensor::empty({2, 3}, DType::f32);
  Tensor short_bias = Tensor::zeros({2}, DType::f32), bias = Tensor::zeros({3}, DType::f32);
  EXPECT_THROW(head_gate({x, short_bias, {}, out}), Error);
  EXPECT_THROW(head_gate({x, bias, {}, out, HeadGateActivation::softplus, 1.0, 0.5}), Error);  // lower > upper
  Tensor dx = Tensor::empty({2, 3}, DType::f32), d_a_log = Tensor::empty({3}, DType::f32);
  try {
    head_gate_backward({x, bias, {}, out, dx, {}, d_a_log});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("head_gate_backward: d_a_log needs a_log"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace lathe
