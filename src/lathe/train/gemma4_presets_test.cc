// The Gemma 4 presets (configs/gemma4-*.yaml): they load and validate (train_config_test.cc checks
// every preset), and their parameter counts match the published totals, which come from Google's
// model cards, not from lathe: 31B dense 30.7B; 26B-A4B 25.2B total and 3.8B active per token;
// E2B 2.3B "effective" (the text decoder without its per-layer embedding table, a lookup).
#include <gtest/gtest.h>

#include "lathe/train/train_config.h"

namespace lathe {
namespace {

ModelConfig preset(const std::string& name) {
  return parse_train_config({LATHE_SOURCE_DIR "/configs/" + name + ".yaml"}, {}).model;
}

void expect_within_half_percent(double value, double published, const char* what) {
  EXPECT_NEAR(value / published, 1.0, 0.005) << what << ": " << value;
}

TEST(Gemma4Presets, ParameterCountsMatchThePublishedTotals) {
  const ModelConfig dense = preset("gemma4-31b");
  expect_within_half_percent(static_cast<double>(dense.parameter_count()), 30.7e9, "31B total");
  const ModelConfig moe = preset("gemma4-26b-a4b");
  expect_within_half_percent(static_cast<double>(moe.parameter_count()), 25.2e9, "26B-A4B total");
  // The published 3.8B rounds; the routed experts count 8 of 128.
  EXPECT_NEAR(static_cast<double>(moe.active_parameter_count()) / 3.8e9, 1.0, 0.02);
  const ModelConfig e2b = preset("gemma4-e2b");
  const double table = static_cast<double>(e2b.vocab_size * e2b.n_layers * e2b.per_layer_input_dim);
  EXPECT_NEAR((static_cast<double>(e2b.parameter_count()) - table) / 2.3e9, 1.0, 0.03);
  const ModelConfig small = preset("gemma4-small");
  EXPECT_GT(small.kv_shared_layers, 0);
  EXPECT_EQ(small.family, "gemma4");
}

}  // namespace
}  // namespace lathe
