// Learning-rate schedules at hand-computed points, and the optimizer's clipping, weight-decay
// groups and state round trip against a plain-loop AdamW written here from the formula.
#include "lathe/train/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/rng.h"
#include "lathe/train/lr_schedule.h"
#include "test_seed.h"
#include "tiny_model.h"

namespace lathe {
namespace {

TEST(LearningRate, WarmupThenCosineAtHandComputedPoints) {
  OptimizerSection optimizer;
  optimizer.lr = 1.0;
  optimizer.min_lr_ratio = 0.1;
  optimizer.warmup_steps = 10;
  optimizer.schedule = LrSchedule::cosine;
  EXPECT_DOUBLE_EQ(learning_rate(optimizer, 110, 1), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(optimizer, 110, 10), 1.0);
  EXPECT_NEAR(learning_rate(optimizer, 110, 60), 0.55, 1e-12);  // halfway: floor + (1 - floor) / 2
  EXPECT_NEAR(learning_rate(optimizer, 110, 110), 0.1, 1e-12);
  optimizer.schedule = LrSchedule::constant;
  EXPECT_DOUBLE_EQ(learning_rate(optimizer, 110, 100), 1.0);
}

TEST(LearningRate, WarmupStableDecay) {
  OptimizerSection optimizer;
  optimizer.lr = 2.0;
  optimizer.min_lr_ratio = 0.0;
  optimizer.warmup_steps = 0;
  optimizer.schedule = LrSchedule::wsd;
  optimizer.decay_steps_fraction = 0.2;  // the last 20 of 100 steps
  EXPECT_DOUBLE_EQ(learning_rate(optimizer, 100, 1), 2.0);
  EXPECT_DOUBLE_EQ(learning_rate(optimizer, 100, 80), 2.0);
  EXPECT_DOUBLE_EQ(learning_rate(optimizer, 100, 90), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(optimizer, 100, 100), 0.0);
}

ModelConfig small_config() {
  return tiny_model_config(
      {.vocab_size = 11, .d_model = 4, .n_layers = 1, .n_heads = 1, .n_kv_heads = 1, .ffn_dim = 6, .max_seq_len = 256});
}

TEST(AdamWOptimizer, ClipsByGlobalNormAndDecaysOnlyMatrices) {
  const uint64_t seed = test_seed();
  TransformerModel model(small_config());
  model.initialize(seed);
  for (size_t i = 0; i < model.parameters().size(); ++i)
    fill_uniform(model.parameters()[i].var->grad, seed, -3, 3, 100 + i);
  OptimizerSection config;
  config.grad_clip = 0.5;
  config.weight_decay = 0.1;
  AdamWOptimizer optimizer(model.parameters(), config);

  // Expected values from the formula, in double: g' = g * clip / (norm + 1e-6), one step from zero moments.
  double sum_squares = 0;
  for (const Parameter& parameter : model.parameters())
    for (double g : to_vector<double>(parameter.var->grad)) sum_squares += g * g;
  const double norm = std::sqrt(sum_squares), scale = 0.5 / (norm + 1e-6), lr = 0.01;
  std::vector<std::vector<double>> expected;
  for (const Parameter& parameter : model.parameters()) {
    std::vector<double> p = to_vector<double>(parameter.var->value), g = to_vector<double>(parameter.var->grad);
    const double decay = parameter.kind == ParameterKind::matrix ? 0.1 : 0.0;
    for (size_t j = 0; j < p.size(); ++j) {
      const double gs = g[j] * scale;
      const double m = (1 - config.beta1) * gs, v = (1 - config.beta2) * gs * gs;
      p[j] -= lr * decay * p[j];
      p[j] -= (lr / (1 - config.beta1)) * m / (std::sqrt(v) / std::sqrt(1 - config.beta2) + config.eps);
    }
    expected.push_back(p);
  }
  EXPECT_NEAR(optimizer.step(1, lr), norm, 1e-9 * norm);
  for (size_t i = 0; i < expected.size(); ++i) {
    const std::vector<double> got = to_vector<double>(model.parameters()[i].var->value);
    for (size_t j = 0; j < got.size(); ++j)
      ASSERT_NEAR(got[j], expected[i][j], 1e-6) << model.parameters()[i].name << "[" << j << "]";
  }
  EXPECT_FALSE(optimizer.decays(*model.find_parameter("model.norm.weight")));
  EXPECT_FALSE(optimizer.decays(*model.find_parameter("model.embed_tokens.weight")));
  EXPECT_TRUE(optimizer.decays(*model.find_parameter("lm_head.weight")));
}

TEST(AdamWOptimizer, StateRoundTripAndMissingTensorError) {
  TransformerModel model(small_config());
  model.initialize(1);
  for (size_t i = 0; i < model.parameters().size(); ++i) fill_uniform(model.parameters()[i].var->grad, 2, -1, 1, i);
  AdamWOptimizer first(model.parameters(), {});
  first.step(1, 0.01);
  AdamWOptimizer second(model.parameters(), {});
  second.load_state(first.state());
  for (size_t i = 0; i < first.state().size(); ++i)
    EXPECT_EQ(to_vector<float>(first.state()[i].second), to_vector<float>(second.state()[i].second));
  auto partial = first.state();
  partial.pop_back();
  EXPECT_THROW(second.load_state(partial), Error);
}

// The norm over every gradient against one long double sum written here, at sizes around the
// chunk (65536) and the lanes (8) and below both.
TEST(GlobalGradientNorm, MatchesPlainSumOfSquares) {
  const uint64_t seed = test_seed();
  std::vector<Parameter> parameters;
  double expected = 0;
  uint64_t stream = 0;
  for (int64_t n : {1, 7, 8, 13, 65536, 65536 + 9, 3 * 65536 - 5}) {
    Tensor grad = Tensor::empty({n}, DType::f32);
    fill_normal(grad, seed, 0.0, 1.0, ++stream);
    for (int64_t i = 0; i < n; ++i) expected += static_cast<double>(grad.ptr<float>()[i]) * grad.ptr<float>()[i];
    Parameter parameter;
    parameter.name = "p" + std::to_string(n);
    parameter.kind = ParameterKind::matrix;
    parameter.var = autograd::make_parameter(Tensor::zeros({n}, DType::f32), grad);
    parameters.push_back(parameter);
  }
  EXPECT_NEAR(global_gradient_norm(parameters), std::sqrt(expected), 1e-12 * std::sqrt(expected)) << "seed " << seed;
}

}  // namespace
}  // namespace lathe
