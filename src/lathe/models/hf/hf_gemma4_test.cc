// Gemma 4 config.json <-> ModelConfig (models/hf/hf_gemma4.h): the defaults of transformers 5.24's
// Gemma4TextConfig (configuration_gemma4.py) for every key a config may leave out, the multimodal
// wrapper, one clear error per option lathe lacks, the export round trip, and Gemma 3's published
// linear RoPE scaling.
#include <gtest/gtest.h>

#include "lathe/core/error.h"
#include "lathe/models/hf/hf_config.h"

namespace lathe {
namespace {

HfModelDescription parse(const std::string& text) { return model_config_from_hf_json(Json::parse(text), "cfg.json"); }

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

const std::string kShape = R"("vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 12,
    "num_attention_heads": 8)";

// Every default below is read off configuration_gemma4.py (the class fields and __post_init__).
TEST(HfGemma4, MissingKeysTakeTheTransformersDefaults) {
  const HfModelDescription description = parse(R"({"model_type": "gemma4_text", )" + kShape + "}");
  const ModelConfig& c = description.config;
  EXPECT_EQ(c.family, "gemma4");
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.global_head_dim, 512);  // popped from kwargs with default 512
  EXPECT_EQ(c.global_kv_heads, 0);    // num_global_key_value_heads None
  EXPECT_FALSE(c.attention_k_eq_v);
  EXPECT_EQ(c.max_seq_len, 131072);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.ffn_activation, FfnActivation::gelu_tanh);
  EXPECT_EQ(c.sliding_window, 512);
  EXPECT_EQ(c.sliding_window_pattern, 6);  // layer_types: every 6th full
  EXPECT_TRUE(c.layer_is_local(0));
  EXPECT_FALSE(c.layer_is_local(5));
  EXPECT_EQ(c.rope_theta, 1e6);  // full_attention: proportional, 0.25, theta 1e6
  EXPECT_EQ(c.rope_scaling, "proportional");
  EXPECT_EQ(c.rope_scaling_factor, 1.0);
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rope_local_theta, 1e4);  // sliding_attention: default, theta 10000
  EXPECT_TRUE(c.rope_local_plain);
  EXPECT_EQ(c.per_layer_input_dim, 256);
  EXPECT_EQ(c.per_layer_input_vocab, 262144);
  EXPECT_EQ(c.kv_shared_layers, 0);
  EXPECT_FALSE(c.double_wide_mlp);
  EXPECT_EQ(c.moe_experts, 0);
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  EXPECT_EQ(c.attn_logit_softcap, 0.0f);
  EXPECT_EQ(c.attention_scale, 1.0f);  // Gemma4TextAttention.scaling
  EXPECT_TRUE(c.value_norm);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.sandwich_norms);
  EXPECT_EQ(c.norm_weight_offset, 0.0f);
  EXPECT_EQ(c.embedding_scale, 0.0f);
}

// A 26B-A4B-like text config with every option given, and its round trip through the export.
constexpr const char* kMoe = R"({"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
  "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 4, "num_attention_heads": 4,
  "num_key_value_heads": 2, "head_dim": 8, "global_head_dim": 16, "num_global_key_value_heads": 1,
  "attention_k_eq_v": true, "max_position_embeddings": 4096, "sliding_window": 16,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
  "num_kv_shared_layers": 2, "use_double_wide_mlp": true, "hidden_size_per_layer_input": 8,
  "vocab_size_per_layer_input": 64, "enable_moe_block": true, "num_experts": 8, "top_k_experts": 2,
  "moe_intermediate_size": 12, "final_logit_softcapping": 30.0, "use_bidirectional_attention": null,
  "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                      "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                         "rope_theta": 1000000.0}}})";

TEST(HfGemma4, ReadsEveryOptionAndExportsItBack) {
  const ModelConfig c = parse(kMoe).config;
  EXPECT_EQ(c.layer_head_dim(0), 8);
  EXPECT_EQ(c.layer_head_dim(1), 16);
  EXPECT_EQ(c.layer_kv_heads(0), 2);
  EXPECT_EQ(c.layer_kv_heads(1), 1);
  EXPECT_TRUE(c.attention_k_eq_v);
  EXPECT_EQ(c.kv_source_layer(2), 0);
  EXPECT_EQ(c.kv_source_layer(3), 1);
  EXPECT_TRUE(c.double_wide_mlp);
  EXPECT_EQ(c.per_layer_input_dim, 8);
  EXPECT_EQ(c.per_layer_input_vocab, 0);  // the vocabulary itself
  EXPECT_EQ(c.moe_experts, 8);
  EXPECT_EQ(c.moe_top_k, 2);
  EXPECT_EQ(c.moe_ffn_dim, 12);
  EXPECT_EQ(c.moe_aux_loss_coef, 0.0);  // Gemma4ForCausalLM has no router loss
  EXPECT_EQ(c.final_logit_softcap, 30.0f);
  const Json exported = hf_json_from_model_config(c);
  EXPECT_EQ(exported.find("architectures")->items()[0].as_string(), "Gemma4ForCausalLM");
  EXPECT_EQ(exported.find("global_head_dim")->as_number(), 16);
  EXPECT_EQ(parse(exported.dump(0)).config, c);
  EXPECT_EQ(parse(hf_config_text(exported)).config, c);
}

TEST(HfGemma4, MultimodalCheckpointLoadsItsTextDecoder) {
  const std::string text = R"({"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4",
      "text_config": )" + std::string(kMoe) +
                           R"(, "vision_config": {"model_type": "gemma4_vision"},
      "audio_config": {"model_type": "gemma4_audio"}})";
  const HfModelDescription description = parse(text);
  EXPECT_EQ(description.layout, HfWeightLayout::multimodal_text);
  EXPECT_EQ(description.config, parse(kMoe).config);
  EXPECT_EQ(lathe_name_from_hf("model.language_model.layers.3.router.proj.weight", description),
            "model.layers.3.router.proj.weight");
  EXPECT_EQ(lathe_name_from_hf("model.language_model.embed_tokens_per_layer.weight", description),
            "model.embed_tokens_per_layer.weight");
  for (const char* skipped :
       {"model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight",
        "model.audio_tower.layers.0.feed_forward1.ffw_layer_1.linear.weight",
        "model.embed_vision.embedding_projection.weight", "model.embed_audio.embedding_projection.weight"})
    EXPECT_EQ(lathe_name_from_hf(skipped, description), "") << skipped;
}

TEST(HfGemma4, EveryOptionLatheLacksIsOneClearError) {
  const std::string base = R"({"model_type": "gemma4_text", )" + kShape;
  EXPECT_NE(
      error_of(base + R"(, "use_bidirectional_attention": "all"})").find("\"use_bidirectional_attention\"=\"all\""),
      std::string::npos);
  EXPECT_NE(error_of(base + R"(, "rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 1e6}}})")
                .find("rope_type \"yarn\""),
            std::string::npos);
  EXPECT_NE(error_of(base + R"(, "rope_parameters": {"sliding_attention": {"rope_type": "linear", "factor": 2}}})")
                .find("rope_parameters.sliding_attention"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "gemma4_text", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
      "num_hidden_layers": 8, "num_attention_heads": 8})")
                .find("forces to full attention"),
            std::string::npos);
  EXPECT_NE(error_of(base + R"(, "enable_moe_block": true, "num_experts": 4})").find("\"top_k_experts\""),
            std::string::npos);
  EXPECT_NE(error_of(base + R"(, "num_kv_shared_layers": 11})").find("\"num_kv_shared_layers\"=11"), std::string::npos);
  EXPECT_NE(error_of(base + R"(, "vocab_size_per_layer_input": 32})").find("\"vocab_size_per_layer_input\"=32"),
            std::string::npos);
}

TEST(HfGemma4, ExportRefusesWhatGemma4ForCausalLMCannotSay) {
  ModelConfig c = parse(kMoe).config;
  c.attention_scale = 0;
  EXPECT_THROW(hf_json_from_model_config(c), Error);
  ModelConfig llama;
  llama.per_layer_input_dim = 4;  // a Gemma 4 mechanism on another family
  EXPECT_THROW(hf_json_from_model_config(llama), Error);
}

// google/gemma-3-4b-pt's text config (4.x keys): linear RoPE scaling by 8 on the global layers only.
TEST(HfGemma4, Gemma3PublishedLinearScalingLoadsAndRoundTrips) {
  const ModelConfig c = parse(R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
      "vocab_size": 262208, "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "query_pre_attn_scalar": 256,
      "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "rope_theta": 1000000.0,
      "rope_local_base_freq": 10000.0, "sliding_window": 1024, "sliding_window_pattern": 6,
      "max_position_embeddings": 131072})")
                            .config;
  EXPECT_EQ(c.rope_scaling, "linear");
  EXPECT_EQ(c.rope_scaling_factor, 8.0);
  EXPECT_TRUE(c.rope_local_plain);
  EXPECT_EQ(c.rope_local_theta, 10000.0);
  EXPECT_EQ(parse(hf_json_from_model_config(c).dump(0)).config, c);
  // 5.x keys: per layer type.
  const ModelConfig five = parse(R"({"model_type": "gemma3_text", "vocab_size": 64, "hidden_size": 32,
      "intermediate_size": 48, "num_hidden_layers": 6, "num_attention_heads": 4, "head_dim": 8, "sliding_window": 8,
      "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})")
                               .config;
  EXPECT_EQ(five.rope_scaling, "linear");
  EXPECT_EQ(five.rope_local_theta, 10000.0);
}

}  // namespace
}  // namespace lathe
