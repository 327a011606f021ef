// The Mamba-2 layer (models/mamba2_layer.h): its Hugging Face names, shapes and kinds, its
// initialisation (transformers' init_mamba2_weights), the decode state (constant in the context,
// token-by-token decoding equal to the full forward across scan chunks), and that the golden
// model's clamped step size and D skip really show in its logits. Gradients (finite differences,
// fast vs float64) and short-prompt decoding are in transformer_test.cc (ModelVariants mamba2*).
#include "lathe/models/mamba2_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "lathe/core/rng.h"
#include "lathe/io/durable_file.h"
#include "lathe/models/hf/hf_checkpoint.h"
#include "lathe/models/transformer.h"
#include "test_seed.h"

namespace lathe {
namespace {

ModelConfig small_mamba2() {
  ModelConfig c;
  c.family = "mamba2";
  c.vocab_size = 40;
  c.d_model = 12;
  c.n_layers = 2;
  c.n_heads = c.n_kv_heads = 6;
  c.head_dim = 4;  // inner width 24 = 2 d_model
  c.ffn_dim = 24;
  c.ssm_state_size = 5;
  c.ssm_groups = 3;
  c.ssm_conv_kernel = 4;
  c.max_seq_len = 512;
  c.init_std = 0.3;
  return c;
}

TEST(Mamba2Layer, ParametersAreTheHfNamesShapesAndKinds) {
  ModelConfig c = small_mamba2();
  c.ssm_projection_bias = true;
  const int64_t channels = 24 + 2 * 3 * 5, projection = 24 + channels + 6;
  EXPECT_EQ(mamba2_conv_channels(c), channels);
  EXPECT_EQ(mamba2_projection_width(c), projection);
  std::map<std::string, std::pair<Shape, ParameterKind>> declared;
  for (const LayerParameterSpec& p : mamba2_layer_parameters(c, 0))
    declared.emplace(p.name, std::pair{p.shape, p.kind});
  const std::map<std::string, std::pair<Shape, ParameterKind>> expected = {
      {"norm.weight", {{12}, ParameterKind::norm}},
      {"mixer.conv1d.weight", {{channels, 1, 4}, ParameterKind::matrix}},
      {"mixer.conv1d.bias", {{channels}, ParameterKind::bias}},
      {"mixer.in_proj.weight", {{projection, 12}, ParameterKind::matrix}},
      {"mixer.in_proj.bias", {{projection}, ParameterKind::bias}},
      {"mixer.dt_bias", {{6}, ParameterKind::bias}},
      {"mixer.A_log", {{6}, ParameterKind::bias}},
      {"mixer.norm.weight", {{24}, ParameterKind::norm}},
      {"mixer.D", {{6}, ParameterKind::bias}},
      {"mixer.out_proj.weight", {{12, 24}, ParameterKind::matrix}},
      {"mixer.out_proj.bias", {{12}, ParameterKind::bias}},
  };
  EXPECT_EQ(declared, expected);
  c.ssm_projection_bias = false;
  c.ssm_conv_bias = false;
  EXPECT_EQ(mamba2_layer_parameters(c, 0).size(), expected.size() - 3);
  TransformerModel model(c);
  EXPECT_EQ(model.parameter_count(), c.parameter_count());
}

// transformers' init_mamba2_weights: A_log = log(1..H), D = 1, dt_bias = softplus^-1 of a step in
// [time_step_min, time_step_max]; the conv weight is torch's Conv1d default, within 1/sqrt(K).
TEST(Mamba2Layer, InitialisesAsTransformers) {
  const ModelConfig c = small_mamba2();
  TransformerModel model(c);
  model.initialize(test_seed());
  const std::vector<double> a_log = to_vector<double>(model.find_parameter("model.layers.1.mixer.A_log")->var->value);
  const std::vector<double> d = to_vector<double>(model.find_parameter("model.layers.1.mixer.D")->var->value);
  const std::vector<double> dt_bias =
      to_vector<double>(model.find_parameter("model.layers.1.mixer.dt_bias")->var->value);
  for (int64_t h = 0; h < c.n_heads; ++h) {
    EXPECT_NEAR(a_log[h], std::log(h + 1.0), 1e-6);
    EXPECT_EQ(d[h], 1.0);
    const double step = std::log1p(std::exp(dt_bias[h]));
    EXPECT_GE(step, c.ssm_dt_init_min * (1 - 1e-5));
    EXPECT_LE(step, c.ssm_dt_init_max * (1 + 1e-5));
  }
  EXPECT_NE(dt_bias[0], dt_bias[1]);
  const std::vector<double> conv =
      to_vector<double>(model.find_parameter("model.layers.0.mixer.conv1d.weight")->var->value);
  double largest = 0;
  for (double w : conv) largest = std::max(largest, std::fabs(w));
  EXPECT_LE(largest, 0.5);
  EXPECT_GT(largest, 0.25);  // spread over the bound, not normal(0, init_std) around 0
}

TEST(Mamba2Layer, DecodeStateIsConstantInTheContext) {
  const ModelConfig c = small_mamba2();
  const TransformerModel model(c);
  const int64_t per_layer = 4 * ((4 - 1) * mamba2_conv_channels(c) + 6 * 4 * 5);
  for (int64_t context : {16, 256, 512}) {
    const KvCache cache = model.make_kv_cache(context);
    EXPECT_EQ(cache.bytes_per_token(), 0) << context;
    EXPECT_EQ(cache.recurrent_state_bytes(), c.n_layers * per_layer) << context;
    EXPECT_FALSE(cache.rewindable());
  }
}

// Prompts past the scan kernel's chunk (64 tokens by default): a 70-token prefill, then 30 single
// tokens, each step's logits against a full forward over the same tokens, and a second prefill of
// the whole sequence after clear().
TEST(Mamba2Layer, TokenByTokenDecodingMatchesTheFullForward) {
  const uint64_t seed = test_seed();
  const ModelConfig c = small_mamba2();
  TransformerModel model(c);
  model.initialize(seed);
  const int64_t prefill = 70, total = 100;
  Tensor ids = Tensor::empty({1, total}, DType::i32);
  fill_uniform(ids, seed, 0, static_cast<double>(c.vocab_size), 3);
  const Tensor full_logits = model.logits(ids);
  const std::vector<float> full = to_vector<float>(full_logits);
  KvCache cache = model.make_kv_cache(c.max_seq_len);
  const int64_t state_bytes = cache.recurrent_state_bytes();
  double worst = 0, scale = 0;
  for (int64_t begin = 0; begin < total;) {
    const int64_t end = begin == 0 ? prefill : begin + 1;
    Tensor chunk = Tensor::empty({1, end - begin}, DType::i32);
    for (int64_t i = begin; i < end; ++i) chunk.ptr<int32_t>()[i - begin] = ids.ptr<int32_t>()[i];
    const Tensor step_logits = model.next_token_logits(chunk, cache);
    const std::vector<float> step = to_vector<float>(step_logits);
    for (int64_t v = 0; v < c.vocab_size; ++v) {
      const double want = full[static_cast<size_t>((end - 1) * c.vocab_size + v)];
      worst = std::isnan(worst) || std::isnan(step[v]) ? NAN : std::max(worst, std::fabs(step[v] - want));
      scale = std::max(scale, std::fabs(want));
    }
    begin = end;
  }
  EXPECT_EQ(cache.length, total);
  EXPECT_EQ(cache.recurrent_state_bytes(), state_bytes);
  EXPECT_LE(worst, 2e-5 * scale) << "seed " << seed << " logit scale " << scale;
  cache.clear();
  const Tensor again_logits = model.next_token_logits(ids, cache);
  const std::vector<float> again = to_vector<float>(again_logits);
  for (int64_t v = 0; v < c.vocab_size; ++v)
    EXPECT_NEAR(again[v], full[static_cast<size_t>((total - 1) * c.vocab_size + v)], 2e-5 * scale);
}

// The golden model (tests/golden/hf/mamba2, written by transformers) clamps its step size at both
// ends and has a D skip: without any one, its logits move ten times past hf_oracle_test.py's f32
// bound (1e-5 of the logit scale), so the golden comparison covers each (the lower clamp holds
// steps just under 0.002, so it moves them least).
TEST(Mamba2Layer, ClampAndSkipShowInTheGoldenLogits) {
  const std::string dir = LATHE_SOURCE_DIR "/tests/golden/hf/mamba2";
  const TransformerModel golden = load_hf_model(dir);
  const Json info = Json::parse(read_file_contents(dir + "/golden.json"));
  const Json& prompt = info.find("prompts")->items().back();
  Tensor ids = Tensor::empty({1, static_cast<int64_t>(prompt.size())}, DType::i32);
  for (size_t i = 0; i < prompt.size(); ++i)
    ids.ptr<int32_t>()[i] = static_cast<int32_t>(prompt.items()[i].as_number());
  const Tensor base_logits = golden.logits(ids);
  const std::vector<float> base = to_vector<float>(base_logits);
  const double bound = 1e-4 * info.find("logit_scale")->as_number();
  auto moved = [&](const ModelConfig& config, const char* zeroed) {
    TransformerModel model(config);
    for (size_t i = 0; i < model.parameters().size(); ++i) {
      write_from_vector(model.parameters()[i].var->value, to_vector<float>(golden.parameters()[i].var->value));
      if (zeroed && model.parameters()[i].name.ends_with(zeroed)) fill_value(model.parameters()[i].var->value, 0.0);
    }
    const Tensor logits_tensor = model.logits(ids);
    const std::vector<float> logits = to_vector<float>(logits_tensor);
    double worst = 0;
    for (size_t i = 0; i < logits.size(); ++i)  // a NaN logit stays NaN, so no expectation passes on it
      worst =
          std::isnan(worst) || std::isnan(logits[i]) ? NAN : std::max(worst, std::fabs(double(logits[i]) - base[i]));
    return worst;
  };
  ModelConfig no_lower = golden.config(), no_upper = golden.config();
  no_lower.ssm_dt_min = 0;
  no_upper.ssm_dt_max = 0;
  EXPECT_GT(moved(no_lower, nullptr), bound) << "lower clamp";
  EXPECT_GT(moved(no_upper, nullptr), bound) << "upper clamp";
  EXPECT_GT(moved(golden.config(), "mixer.D"), bound) << "D skip";
}

}  // namespace
}  // namespace lathe
