// AdamW-specific tests: properties of the update derived from its definition (zero gradient
// without decay is a no-op; the first bias-corrected step moves each weight by lr * sign(g);
// a decay-only step scales by 1 - lr * weight_decay), the bf16 copy, several steps against the
// float64 reference, and validation errors.
#include "lathe/ops/adamw/adamw.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe {
namespace {

struct State {
  Tensor param, grad, m, v, param_bf16;
  AdamWArgs args() const { return {param, grad, m, v, param_bf16}; }
};

State make_state(int64_t n, uint64_t seed, bool zero_moments) {
  State s{Tensor::empty({n}, DType::f32), Tensor::empty({n}, DType::f32), Tensor::zeros({n}, DType::f32),
          Tensor::zeros({n}, DType::f32), Tensor::empty({n}, DType::bf16)};
  fill_uniform(s.param, seed, -1, 1, 1);
  fill_uniform(s.grad, seed, -1, 1, 2);
  if (!zero_moments) {
    fill_uniform(s.m, seed, -0.1, 0.1, 3);
    fill_uniform(s.v, seed, 0, 0.01, 4);
  }
  return s;
}

TEST(AdamW, ZeroGradientWithoutDecayLeavesParamsUnchanged) {
  const uint64_t seed = test_seed();
  State s = make_state(1001, seed, /*zero_moments=*/true);
  fill_value(s.grad, 0.0);
  std::vector<float> before = to_vector<float>(s.param);
  AdamWArgs args = s.args();
  args.lr = 0.01f;
  args.weight_decay = 0.0f;
  args.step = 7;
  adamw(args);
  EXPECT_EQ(to_vector<float>(s.param), before) << "seed=" << seed;
}

TEST(AdamW, FirstStepMovesEachParamByLrTimesSignOfGradient) {
  const uint64_t seed = test_seed();
  State s = make_state(1003, seed, /*zero_moments=*/true);
  std::vector<float> before = to_vector<float>(s.param), grad = to_vector<float>(s.grad);
  AdamWArgs args = s.args();
  args.lr = 0.01f;
  args.eps = 1e-12f;
  args.step = 1;
  adamw(args);
  std::vector<float> after = to_vector<float>(s.param);
  for (size_t i = 0; i < before.size(); ++i) {
    if (std::fabs(grad[i]) < 1e-3f) continue;  // eps matters only for vanishing gradients
    const double expected = before[i] - 0.01 * (grad[i] > 0 ? 1.0 : -1.0);
    ASSERT_NEAR(after[i], expected, 1e-6) << "element " << i << " grad " << grad[i] << " seed=" << seed;
  }
}

TEST(AdamW, DecayOnlyStepScalesParams) {
  const uint64_t seed = test_seed();
  State s = make_state(517, seed, /*zero_moments=*/true);
  fill_value(s.grad, 0.0);
  std::vector<float> before = to_vector<float>(s.param);
  AdamWArgs args = s.args();
  args.lr = 0.1f;
  args.weight_decay = 0.5f;
  adamw(args);
  std::vector<float> after = to_vector<float>(s.param), copy = to_vector<float>(s.param_bf16);
  for (size_t i = 0; i < before.size(); ++i) {
    ASSERT_NEAR(after[i], before[i] * (1 - 0.1 * 0.5), 2e-7) << "element " << i << " seed=" << seed;
    ASSERT_EQ(copy[i], bf16_to_float(float_to_bf16(after[i]))) << "bf16 copy, element " << i;
  }
  EXPECT_EQ(to_vector<float>(s.m), std::vector<float>(before.size(), 0.0f));
}

TEST(AdamW, SeveralStepsTrackTheFloat64Reference) {
  const uint64_t seed = test_seed();
  const int64_t n = 777;
  State fast = make_state(n, seed, false);
  Tensor param = convert(fast.param, DType::f64);
  Tensor m = convert(fast.m, DType::f64), v = convert(fast.v, DType::f64);
  for (int64_t step = 1; step <= 5; ++step) {
    fill_uniform(fast.grad, seed + step, -1, 1, 5);
    AdamWArgs args = fast.args();
    args.param_bf16 = TensorView{};
    args.lr = 1e-2f;
    args.weight_decay = 0.1f;
    args.step = step;
    args.grad_scale = 0.25f;
    adamw(args);
    AdamWArgs exact = args;
    exact.param = param;
    Tensor grad64 = convert(fast.grad, DType::f64);
    exact.grad = grad64;
    exact.m = m;
    exact.v = v;
    adamw_reference<double>(exact, exact);
  }
  std::vector<double> got = to_vector<double>(fast.param), want = to_vector<double>(param);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 2e-6) << "element " << i << " seed=" << seed;
}

TEST(AdamW, RejectsBadArguments) {
  State s = make_state(16, 1, true);
  Tensor short_grad = Tensor::empty({15}, DType::f32), f32_copy = Tensor::empty({16}, DType::f32);
  Tensor bf16_param = Tensor::empty({16}, DType::bf16);
  AdamWArgs args = s.args();
  args.step = 0;
  EXPECT_THROW(adamw(args), Error);
  args = s.args();
  args.grad = short_grad;
  EXPECT_THROW(adamw(args), Error);
  args = s.args();
  args.beta1 = 1.0f;
  EXPECT_THROW(adamw(args), Error);
  args = s.args();
  args.eps = 0.0f;
  EXPECT_THROW(adamw(args), Error);
  args = s.args();
  args.param_bf16 = f32_copy;
  EXPECT_THROW(adamw(args), Error);
  args = s.args();
  args.param = bf16_param;
  try {
    adamw(args);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("adamw: param"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace lathe
