// The Qwen3-Next / Qwen3.5 layer (models/qwen3_next_layer.h): its Hugging Face names and shapes in
// both projection layouts, the decode cache (keys and values only for the full-attention layers, a
// state of fixed size for the linear ones, at any capacity), token-by-token decoding of a prompt
// longer than a delta-rule chunk against the full forward, and the config errors. Gradients, the
// float64 reference and short decodes of both families are in transformer_test.cc (ModelVariants);
// the logits, loss and gradients against transformers in tests/golden/hf/qwen3_next and qwen3_5_text.
#include "lathe/models/qwen3_next_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "expect_error.h"
#include "lathe/core/json.h"
#include "lathe/core/rng.h"
#include "lathe/models/hf/hf_config.h"
#include "lathe/models/transformer.h"
#include "test_seed.h"

namespace lathe {
namespace {

ModelConfig small_hybrid(const std::string& family) {
  ModelConfig c;
  c.family = family;
  c.vocab_size = 37;
  c.d_model = 24;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.ffn_dim = 20;
  c.full_attention_interval = 2;  // linear, full, linear, full
  c.linear_key_heads = 2;
  c.linear_value_heads = 6;
  c.linear_key_head_dim = 5;
  c.linear_value_head_dim = 3;
  c.linear_conv_kernel = 4;
  c.qk_norm = true;
  c.norm_weight_offset = 1;
  c.attention_output_gate = true;
  c.partial_rotary_factor = 0.25;
  c.max_seq_len = 160;
  if (family == "qwen3_next") {
    c.moe_experts = 3;
    c.moe_top_k = 3;  // every expert: near-tied routing cannot flip between the two decodes
    c.moe_ffn_dim = 7;
    c.moe_shared_ffn_dim = 9;
    c.moe_shared_gate = true;
  }
  return c;
}

std::map<std::string, Shape> declared(const ModelConfig& config, int64_t layer) {
  std::map<std::string, Shape> out;
  for (const LayerParameterSpec& p : find_family_spec(config.family).layer.parameters(config, layer))
    out[p.name] = p.shape;
  return out;
}

// The state dicts of Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet and Qwen3NextAttention.
TEST(Qwen3NextLayer, DeclaresTheHfNamesAndShapes) {
  const ModelConfig next = small_hybrid("qwen3_next");
  // keys 2 x 5, values 6 x 3: conv channels 2 * 10 + 18 = 38
  const std::map<std::string, Shape> linear = declared(next, 0);
  EXPECT_EQ(linear.at("linear_attn.in_proj_qkvz.weight"), Shape({2 * 10 + 2 * 18, 24}));
  EXPECT_EQ(linear.at("linear_attn.in_proj_ba.weight"), Shape({12, 24}));
  EXPECT_EQ(linear.at("linear_attn.conv1d.weight"), Shape({38, 1, 4}));
  EXPECT_EQ(linear.at("linear_attn.dt_bias"), Shape({6}));
  EXPECT_EQ(linear.at("linear_attn.A_log"), Shape({6}));
  EXPECT_EQ(linear.at("linear_attn.norm.weight"), Shape({3}));
  EXPECT_EQ(linear.at("linear_attn.out_proj.weight"), Shape({24, 18}));
  EXPECT_EQ(linear.at("mlp.shared_expert_gate.weight"), Shape({1, 24}));
  EXPECT_EQ(linear.count("self_attn.q_proj.weight"), 0u);
  const std::map<std::string, Shape> full = declared(next, 1);
  EXPECT_EQ(full.at("self_attn.q_proj.weight"), Shape({2 * 4 * 8, 24}));  // query and gate per head
  EXPECT_EQ(full.at("self_attn.o_proj.weight"), Shape({24, 32}));
  EXPECT_EQ(full.at("self_attn.q_norm.weight"), Shape({8}));
  EXPECT_EQ(full.count("linear_attn.conv1d.weight"), 0u);

  const std::map<std::string, Shape> text = declared(small_hybrid("qwen3_5_text"), 2);
  EXPECT_EQ(text.at("linear_attn.in_proj_qkv.weight"), Shape({38, 24}));
  EXPECT_EQ(text.at("linear_attn.in_proj_z.weight"), Shape({18, 24}));
  EXPECT_EQ(text.at("linear_attn.in_proj_b.weight"), Shape({6, 24}));
  EXPECT_EQ(text.at("linear_attn.in_proj_a.weight"), Shape({6, 24}));
  EXPECT_EQ(text.at("mlp.gate_proj.weight"), Shape({20, 24}));
  EXPECT_EQ(text.count("linear_attn.in_proj_qkvz.weight"), 0u);
}

// Keys and values only in the two full-attention layers; the linear layers' state is the same at
// every capacity (the decode memory does not grow with the context).
TEST(Qwen3NextLayer, DecodeStateDoesNotGrowWithTheContext) {
  const TransformerModel model(small_hybrid("qwen3_next"));
  const int64_t state = (4 - 1) * 38 * 4 + 6 * 5 * 3 * 4;  // conv state + delta-rule state, f32, per layer
  for (int64_t capacity : {1024, 4096, 16384}) {
    const KvCache cache = model.make_kv_cache(capacity);
    EXPECT_EQ(cache.recurrent_state_bytes(), 2 * state) << capacity;
    EXPECT_EQ(cache.bytes_per_token(), 2 * 2 * (2 * 8) * 4) << capacity;  // 2 layers x keys and values
    EXPECT_FALSE(cache.rewindable());
  }
}

// A 70-token prompt (past two of the delta rule's 32-token chunks) then one token at a time, against the
// whole sequence in one forward: every decoded position's logits agree.
TEST(Qwen3NextLayer, TokenByTokenDecodingMatchesTheFullForward) {
  for (const char* family : {"qwen3_next", "qwen3_5_text"}) {
    const uint64_t seed = test_seed();
    ModelConfig config = small_hybrid(family);
    config.init_std = 0.2;
    TransformerModel model(config);
    model.initialize(seed);
    const int64_t seq = 90, prompt = 70;
    Tensor ids = Tensor::empty({1, seq}, DType::i32);
    fill_uniform(ids, seed, 0, static_cast<double>(config.vocab_size), 1);
    const Tensor full_logits = model.logits(ids);  // (1, seq, vocab)
    const std::vector<float> full = to_vector<float>(full_logits);
    KvCache cache = model.make_kv_cache(config.max_seq_len);
    double worst = 0, scale = 0;
    for (int64_t begin = 0; begin < seq;) {
      const int64_t end = begin == 0 ? prompt : begin + 1;
      Tensor chunk = Tensor::empty({1, end - begin}, DType::i32);
      for (int64_t i = begin; i < end; ++i) chunk.ptr<int32_t>()[i - begin] = ids.ptr<int32_t>()[i];
      const Tensor last = model.next_token_logits(chunk, cache);
      const std::vector<float> logits = to_vector<float>(last);
      for (int64_t v = 0; v < config.vocab_size; ++v) {
        const double want = full[static_cast<size_t>((end - 1) * config.vocab_size + v)];
        const float got = logits[static_cast<size_t>(v)];
        worst = std::isnan(worst) || std::isnan(got) ? NAN : std::max(worst, std::fabs(got - want));
        scale = std::max(scale, std::fabs(want));
      }
      begin = end;
    }
    EXPECT_EQ(cache.length, seq);
    EXPECT_GT(scale, 0.1) << family;
    // f32 rounding of two summation orders (chunked and one-step delta rule) over 4 layers.
    EXPECT_LE(worst, 3e-5 * std::max(1.0, scale)) << family << " seed " << seed;
  }
}

std::string hf_config(const std::string& extra) {
  return R"({"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "vocab_size": 64,
             "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 4, "num_attention_heads": 4,
             "num_experts": 4, "num_experts_per_tok": 2)" +
         extra + "}";
}

TEST(Qwen3NextLayer, HfConfigTakesTransformersDefaultsAndRefusesWhatLatheLacks) {
  const ModelConfig config = model_config_from_hf_json(Json::parse(hf_config("")), "config.json").config;
  EXPECT_EQ(config.layer_types, "linear_attention,linear_attention,linear_attention,full_attention");
  EXPECT_TRUE(config.layer_is_linear_attention(2));
  EXPECT_FALSE(config.layer_is_linear_attention(3));
  EXPECT_EQ(config.partial_rotary_factor, 0.25);
  EXPECT_EQ(config.linear_conv_kernel, 4);
  EXPECT_TRUE(config.attention_output_gate);
  EXPECT_EQ(config.norm_weight_offset, 1.0f);
  auto refused = [](const std::string& extra, const std::string& expected) {
    expect_error([&] { model_config_from_hf_json(Json::parse(hf_config(extra)), "config.json"); }, expected);
  };
  refused(R"(, "layer_types": ["linear_attention", "sliding_attention", "full_attention", "full_attention"])",
          "\"layer_types\" entry \"sliding_attention\" is not supported");
  refused(R"(, "layer_types": ["linear_attention"])", "\"layer_types\" must list one type per layer (4)");
  refused(R"(, "linear_conv_kernel_dim": 1)", "\"linear_conv_kernel_dim\"=1 is not supported");
  refused(R"(, "linear_conv_kernel_dim": 9)", "\"linear_conv_kernel_dim\"=9 is not supported");
  refused(R"(, "linear_num_key_heads": 3, "linear_num_value_heads": 4)",
          "\"linear_num_value_heads\"=4 must be a positive multiple of \"linear_num_key_heads\"=3");
  refused(R"(, "rope_parameters": {"rope_type": "yarn", "factor": 4.0})",
          "\"rope_parameters.rope_type\"=\"yarn\" is not supported");
  // An export writes what it read.
  const Json exported = hf_json_from_model_config(config);
  const ModelConfig again = model_config_from_hf_json(exported, "export").config;
  EXPECT_EQ(again.layer_types, "linear_attention,linear_attention,linear_attention,full_attention");
  for (int64_t layer = 0; layer < 4; ++layer)
    EXPECT_EQ(again.layer_is_linear_attention(layer), config.layer_is_linear_attention(layer)) << layer;
}

TEST(Qwen3NextLayer, LayerTypesAreParsedStrictly) {
  ModelConfig config = small_hybrid("qwen3_5_text");
  config.layer_types = "linear_attention, full_attention,full_attention,linear_attention";
  EXPECT_TRUE(config.layer_is_linear_attention(3));
  EXPECT_FALSE(config.layer_is_linear_attention(1));
  config.layer_types = "linear_attention,mamba,full_attention,full_attention";
  expect_error([&] { (void)config.layer_is_linear_attention(0); }, "model.layer_types: 'mamba' is not a layer type");
  config.layer_types = "linear_attention,full_attention";
  expect_error([&] { (void)config.layer_is_linear_attention(0); }, "model.layer_types: 2 types for model.n_layers=4");
}

}  // namespace
}  // namespace lathe
