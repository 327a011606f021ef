// The Gemma 4 layer (models/gemma4_layer.h): its Hugging Face names and shapes, the KV cache of a
// KV-sharing model, and for every mechanism of the tiny golden models (tests/golden/hf/gemma4*,
// written by transformers) that switching it off moves the logits far beyond the golden comparison's
// bound, so that comparison really covers it. Gradients and decoding are in transformer_test.cc.
#include "lathe/models/gemma4_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "lathe/io/durable_file.h"
#include "lathe/models/hf/hf_checkpoint.h"
#include "lathe/models/transformer.h"

namespace lathe {
namespace {

ModelConfig small_gemma4() {
  ModelConfig c;
  c.family = "gemma4";
  c.vocab_size = 40;
  c.d_model = 24;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 10;
  c.global_head_dim = 14;
  c.global_kv_heads = 1;
  c.attention_k_eq_v = true;
  c.value_norm = true;
  c.qk_norm = true;
  c.sandwich_norms = true;
  c.ffn_dim = 36;
  c.sliding_window = 4;
  c.sliding_window_pattern = 2;
  c.kv_shared_layers = 2;
  c.double_wide_mlp = true;
  c.per_layer_input_dim = 6;
  c.moe_experts = 5;
  c.moe_top_k = 2;
  c.moe_ffn_dim = 7;
  c.max_seq_len = 32;
  return c;
}

// The names and shapes of Gemma4TextDecoderLayer's state dict (modeling_gemma4.py).
TEST(Gemma4Layer, DeclaresTheHfNamesAndShapes) {
  const ModelConfig c = small_gemma4();
  auto declared = [&](int64_t layer) {
    std::map<std::string, Shape> out;
    for (const LayerParameterSpec& p : gemma4_layer_parameters(c, layer))
      EXPECT_TRUE(out.emplace(p.name, p.shape).second);
    return out;
  };
  std::map<std::string, Shape> common = {{"mlp.gate_proj.weight", {36, 24}},
                                         {"mlp.up_proj.weight", {36, 24}},
                                         {"mlp.down_proj.weight", {24, 36}},
                                         {"input_layernorm.weight", {24}},
                                         {"post_attention_layernorm.weight", {24}},
                                         {"pre_feedforward_layernorm.weight", {24}},
                                         {"post_feedforward_layernorm.weight", {24}},
                                         {"layer_scalar", {1}},
                                         {"per_layer_input_gate.weight", {6, 24}},
                                         {"per_layer_projection.weight", {24, 6}},
                                         {"post_per_layer_input_norm.weight", {24}},
                                         {"router.proj.weight", {5, 24}},
                                         {"router.scale", {24}},
                                         {"router.per_expert_scale", {5}},
                                         {"experts.gate_up_proj", {5, 14, 24}},
                                         {"experts.down_proj", {5, 24, 7}},
                                         {"post_feedforward_layernorm_1.weight", {24}},
                                         {"post_feedforward_layernorm_2.weight", {24}},
                                         {"pre_feedforward_layernorm_2.weight", {24}}};
  std::map<std::string, Shape> sliding = common;  // layer 0: 10 wide, 2 kv heads, its own v_proj
  sliding.insert({{"self_attn.q_proj.weight", {40, 24}},
                  {"self_attn.q_norm.weight", {10}},
                  {"self_attn.k_proj.weight", {20, 24}},
                  {"self_attn.k_norm.weight", {10}},
                  {"self_attn.v_proj.weight", {20, 24}},
                  {"self_attn.o_proj.weight", {24, 40}}});
  EXPECT_EQ(declared(0), sliding);
  std::map<std::string, Shape> global = common;  // layer 1: 14 wide, 1 kv head, k = v
  global.insert({{"self_attn.q_proj.weight", {56, 24}},
                 {"self_attn.q_norm.weight", {14}},
                 {"self_attn.k_proj.weight", {14, 24}},
                 {"self_attn.k_norm.weight", {14}},
                 {"self_attn.o_proj.weight", {24, 56}}});
  EXPECT_EQ(declared(1), global);
  std::map<std::string, Shape> shared = common;  // layer 3: reuses layer 1's keys/values, double-wide MLP
  shared["mlp.gate_proj.weight"] = Shape{72, 24};
  shared["mlp.up_proj.weight"] = Shape{72, 24};
  shared["mlp.down_proj.weight"] = Shape{24, 72};
  shared.insert({{"self_attn.q_proj.weight", {56, 24}},
                 {"self_attn.q_norm.weight", {14}},
                 {"self_attn.o_proj.weight", {24, 56}}});
  EXPECT_EQ(declared(3), shared);
  std::map<std::string, Shape> inputs;
  for (const LayerParameterSpec& p : kGemma4PerLayerInputs.parameters(c)) inputs.emplace(p.name, p.shape);
  EXPECT_EQ(inputs, (std::map<std::string, Shape>{{"embed_tokens_per_layer.weight", {40, 24}},
                                                  {"per_layer_model_projection.weight", {24, 24}},
                                                  {"per_layer_projection_norm.weight", {6}}}));
  TransformerModel model(c);
  model.initialize(1);
  EXPECT_EQ(read_element(model.find_parameter("model.layers.2.layer_scalar")->var->value, 0), 1.0);
  EXPECT_EQ(model.parameter_count(), c.parameter_count());
}

TEST(Gemma4Layer, KvSharingLayersCacheNothing) {
  ModelConfig c = small_gemma4();
  // Layers 0 (sliding: 2 heads x 10) and 1 (global: 1 head x 14) keep keys and values; 2 and 3 reuse them.
  EXPECT_EQ(TransformerModel(c).make_kv_cache(8).bytes_per_token(), 2 * 4 * (2 * 10 + 14));
  c.kv_shared_layers = 0;
  c.double_wide_mlp = false;
  EXPECT_EQ(TransformerModel(c).make_kv_cache(8).bytes_per_token(), 2 * 4 * 2 * (2 * 10 + 14));
}

std::string golden_dir(const std::string& arch) { return std::string(LATHE_SOURCE_DIR) + "/tests/golden/hf/" + arch; }

// Logits of `config` with every parameter the golden model also has (same name and shape) taken
// from it, the others freshly initialised.
Tensor logits_with(const TransformerModel& golden, const ModelConfig& config, const Tensor& ids,
                   const std::function<void(TransformerModel&)>& edit = {}) {
  TransformerModel model(config);
  model.initialize(7);
  for (Parameter& parameter : model.parameters())
    if (const Parameter* source = golden.find_parameter(parameter.name);
        source && source->var->value.shape() == parameter.var->value.shape())
      write_from_vector(parameter.var->value, to_vector<float>(source->var->value));
  if (edit) edit(model);
  return model.logits(ids);
}

double max_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = to_vector<float>(a), y = to_vector<float>(b);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)  // a NaN stays NaN, so no expectation passes on it
    worst = std::isnan(worst) || std::isnan(x[i]) || std::isnan(y[i])
                ? NAN
                : std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
  return worst;
}

void expect_each_mechanism_shows(const std::string& arch,
                                 const std::vector<std::pair<std::string, std::function<void(ModelConfig&)>>>& off) {
  const std::string dir = golden_dir(arch);
  const TransformerModel golden = load_hf_model(dir);
  const Json info = Json::parse(read_file_contents(dir + "/golden.json"));
  const Json& prompt = info.find("prompts")->items().back();  // the longest, past every window
  Tensor ids = Tensor::empty({1, static_cast<int64_t>(prompt.size())}, DType::i32);
  for (size_t i = 0; i < prompt.size(); ++i)
    ids.ptr<int32_t>()[i] = static_cast<int32_t>(prompt.items()[i].as_number());
  const Tensor base = golden.logits(ids);
  // hf_oracle_test.py's f32 bound is 1e-5 of the logit scale: a switched-off mechanism must move the
  // logits by a hundred times that.
  const double bound = 1e-3 * info.find("logit_scale")->as_number();
  for (const auto& [name, switch_off] : off) {
    ModelConfig config = golden.config();
    switch_off(config);
    EXPECT_GT(max_difference(logits_with(golden, config, ids), base), bound) << arch << ": " << name;
  }
  // layer_scalar is a loaded buffer, not a config value: set every one to 1.
  const Tensor unscaled = logits_with(golden, golden.config(), ids, [](TransformerModel& model) {
    for (Parameter& parameter : model.parameters())
      if (parameter.name.ends_with("layer_scalar")) fill_value(parameter.var->value, 1.0);
  });
  EXPECT_GT(max_difference(unscaled, base), bound) << arch << ": layer_scalar";
}

TEST(Gemma4Layer, SwitchingOffAnyMechanismMovesTheGoldenLogits) {
  expect_each_mechanism_shows(
      "gemma4", {{"per-layer embeddings", [](ModelConfig& c) { c.per_layer_input_dim = 0; }},
                 {"global head_dim", [](ModelConfig& c) { c.global_head_dim = 0; }},
                 {"global kv heads", [](ModelConfig& c) { c.global_kv_heads = 0; }},
                 {"attention_k_eq_v", [](ModelConfig& c) { c.attention_k_eq_v = false; }},
                 {"value norm", [](ModelConfig& c) { c.value_norm = false; }},
                 {"proportional RoPE", [](ModelConfig& c) { c.rope_scaling = "none", c.partial_rotary_factor = 1.0; }},
                 {"sliding layers' own RoPE", [](ModelConfig& c) { c.rope_local_plain = false; }},
                 {"KV sharing", [](ModelConfig& c) { c.kv_shared_layers = 0, c.double_wide_mlp = false; }},
                 {"double-wide MLP", [](ModelConfig& c) { c.double_wide_mlp = false; }},
                 {"final soft-capping", [](ModelConfig& c) { c.final_logit_softcap = 0; }},
                 {"sliding window", [](ModelConfig& c) { c.sliding_window = 0, c.sliding_window_pattern = 0; }}});
  expect_each_mechanism_shows("gemma4_moe", {{"MoE block", [](ModelConfig& c) { c.moe_experts = 0; }}});
}

}  // namespace
}  // namespace lathe
