// AdamW-specific tests: properties of the update derived from its definition (zero gradient
// without decay is a no-op; the first bias-corrected step moves each weight by lr * sign(g);
// a decay-only step scales by 1 - lr * weight_decay), the bf16 copy, several steps against the
// float64 reference, and validation errors; adamw_many (one call for a model's tensors) against one
// adamw call per tensor, its batches as the GPU runs them, and on a GPU where one is usable.
#include "lathe/ops/adamw/adamw.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/rng.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/adamw/adamw_cuda_body.h"
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

// A model's worth of steps: more tensors than one GPU launch takes (adamw_cuda::kBatch), sizes
// from empty to several vector widths and blocks, with and without decay and a bf16 copy.
std::vector<State> model_states(uint64_t seed) {
  std::vector<State> states;
  for (int64_t i = 0; i < 2 * adamw_cuda::kBatch + 5; ++i) {
    const int64_t n = i == 3 ? 0 : (i * 37) % 700 + (i % 5 == 0 ? 3000 : 1);
    states.push_back(make_state(n, seed + static_cast<uint64_t>(i), /*zero_moments=*/false));
    if (i % 3 == 0) states.back().param_bf16 = Tensor{};
  }
  return states;
}

std::vector<AdamWArgs> model_steps(const std::vector<State>& states) {
  std::vector<AdamWArgs> steps;
  for (size_t i = 0; i < states.size(); ++i) {
    AdamWArgs args = states[i].args();
    args.lr = 3e-3f;
    args.weight_decay = i % 2 ? 0.1f : 0.0f;
    args.step = 5;
    args.grad_scale = 0.75f;
    steps.push_back(args);
  }
  return steps;
}

void expect_same_states(const std::vector<State>& got, const std::vector<State>& want, uint64_t seed) {
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(to_vector<float>(got[i].param), to_vector<float>(want[i].param)) << "tensor " << i << " seed=" << seed;
    EXPECT_EQ(to_vector<float>(got[i].m), to_vector<float>(want[i].m)) << "tensor " << i;
    EXPECT_EQ(to_vector<float>(got[i].v), to_vector<float>(want[i].v)) << "tensor " << i;
    if (want[i].param_bf16.defined()) {
      EXPECT_EQ(to_vector<float>(got[i].param_bf16), to_vector<float>(want[i].param_bf16)) << "tensor " << i;
    }
  }
}

TEST(AdamWMany, MatchesOneCallPerTensorBitForBit) {
  const uint64_t seed = test_seed();
  std::vector<State> many = model_states(seed), one_by_one = model_states(seed);
  adamw_many(model_steps(many));
  for (const AdamWArgs& args : model_steps(one_by_one)) adamw(args);
  expect_same_states(many, one_by_one, seed);
}

// The GPU's batches (adamw_cuda_body.h), each tensor of each batch run element by element on the
// host as the batch kernel's blocks would: every tensor once, in its own batch slot, bit for bit as
// the CPU kernel (the same correctly rounded fma, sqrt and divide; bf16 rounded to nearest even).
TEST(AdamWMany, TheGpuBatchesUpdateEveryTensorOnceAsTheCpuKernel) {
  const uint64_t seed = test_seed();
  std::vector<State> batched = model_states(seed), cpu = model_states(seed);
  const std::vector<adamw_cuda::Batch> batches = adamw_cuda::batches_of(model_steps(batched));
  ASSERT_EQ(batches.size(), 3u);  // 69 tensors, one empty: 32 + 32 + 4
  EXPECT_EQ(batches[0].count, adamw_cuda::kBatch);
  EXPECT_EQ(batches[2].count, 4);
  for (const adamw_cuda::Batch& batch : batches)
    for (int y = 0; y < batch.count; ++y) {
      EXPECT_LE(batch.tensors[y].n, batch.largest);
      for (int64_t i = 0; i < batch.tensors[y].n; ++i)
        adamw_cuda::update_element(batch.tensors[y], batch.coefficients[y], i);
    }
  for (const AdamWArgs& args : model_steps(cpu)) adamw(args);
  expect_same_states(batched, cpu, seed);
}

TEST(AdamWMany, ABadStepIsRefusedBeforeAnyTensorChanges) {
  std::vector<State> states = model_states(1);
  std::vector<AdamWArgs> steps = model_steps(states);
  steps[40].step = 0;
  const std::vector<float> before = to_vector<float>(states[0].param);
  try {
    adamw_many(steps);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("step is 0"), std::string::npos) << error.what();
  }
  EXPECT_EQ(to_vector<float>(states[0].param), before);
}

// On a real GPU: the batched launches against one adamw call per tensor (the CUDA kernel) and the CPU.
TEST(AdamWMany, BatchedLaunchesOnTheGpuMatchOneCallPerTensor) {
  if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device: " << cuda::status_line();
  const uint64_t seed = test_seed();
  const std::vector<State> host = model_states(seed);
  auto on_device = [](const std::vector<State>& states) {
    std::vector<State> device;
    for (const State& s : states)
      device.push_back({cuda::to_device(s.param), cuda::to_device(s.grad), cuda::to_device(s.m), cuda::to_device(s.v),
                        s.param_bf16.defined() ? cuda::to_device(s.param_bf16) : Tensor{}});
    return device;
  };
  auto back = [](const std::vector<State>& states) {
    std::vector<State> out;
    for (const State& s : states)
      out.push_back({cuda::to_host(s.param), cuda::to_host(s.grad), cuda::to_host(s.m), cuda::to_host(s.v),
                     s.param_bf16.defined() ? cuda::to_host(s.param_bf16) : Tensor{}});
    return out;
  };
  std::vector<State> batched = on_device(host), one_by_one = on_device(host), cpu = model_states(seed);
  adamw_many(model_steps(batched));
  for (const AdamWArgs& args : model_steps(one_by_one)) adamw(args);
  for (const AdamWArgs& args : model_steps(cpu)) adamw(args);
  expect_same_states(back(batched), back(one_by_one), seed);
  expect_same_states(back(batched), cpu, seed);
}

}  // namespace
}  // namespace lathe
