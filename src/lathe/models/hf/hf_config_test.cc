// config.json <-> ModelConfig: configs as transformers 5.24 writes them (captured from the local
// install) and as 4.x checkpoints on the Hub carry them, the round trip for every family, and one
// clear error per unsupported option.
#include "lathe/models/hf/hf_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "lathe/core/error.h"
#include "lathe/io/durable_file.h"
#include "lathe/models/hf/hf_checkpoint.h"

namespace lathe {
namespace {

HfModelDescription parse(const std::string& text) { return model_config_from_hf_json(Json::parse(text), "cfg.json"); }

void expect_error(const std::string& text, const std::string& expected_part) {
  try {
    parse(text);
    ADD_FAILURE() << "no error; expected one containing: " << expected_part;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(expected_part), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("cfg.json"), std::string::npos) << error.what();
  }
}

// transformers 5.24 LlamaConfig(...).to_json_string(), trimmed of keys lathe ignores.
constexpr const char* kLlama5 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "head_dim": 8, "hidden_act": "silu",
  "hidden_size": 32, "initializer_range": 0.02, "intermediate_size": 64, "max_position_embeddings": 2048,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 2,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "pretraining_tp": 1, "use_cache": true,
  "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
  "tie_word_embeddings": false, "vocab_size": 64, "bos_token_id": 1, "eos_token_id": 2})";

TEST(HfConfig, ReadsLlamaFromTransformers5) {
  const HfModelDescription description = parse(kLlama5);
  const ModelConfig& config = description.config;
  EXPECT_EQ(description.layout, HfWeightLayout::causal_lm);
  EXPECT_EQ(config.family, "llama");
  EXPECT_EQ(config.vocab_size, 64);
  EXPECT_EQ(config.d_model, 32);
  EXPECT_EQ(config.n_layers, 2);
  EXPECT_EQ(config.n_heads, 4);
  EXPECT_EQ(config.n_kv_heads, 2);
  EXPECT_EQ(config.head_dim, 8);
  EXPECT_EQ(config.ffn_dim, 64);
  EXPECT_EQ(config.max_seq_len, 2048);
  EXPECT_EQ(config.norm_eps, 1e-6);
  EXPECT_EQ(config.rope_theta, 10000.0);
  EXPECT_EQ(config.rope_scaling, "none");
  EXPECT_FALSE(config.tie_embeddings);
  EXPECT_FALSE(config.qk_norm);
  EXPECT_EQ(config.ffn_activation, FfnActivation::silu);
  EXPECT_EQ(config.sliding_window, 0);
}

TEST(HfConfig, ReadsLlama3ScalingInBothKeyStyles) {
  // Llama 3.2 1B as on the Hub (4.x keys) and the same in 5.x rope_parameters.
  const std::string v4 = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128,
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})";
  const std::string v5 = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128,
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": true, "dtype": "bfloat16",
    "rope_parameters": {"rope_theta": 500000.0, "factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                        "original_max_position_embeddings": 8192, "rope_type": "llama3"}})";
  const ModelConfig config = parse(v4).config;
  EXPECT_EQ(config.rope_theta, 500000.0);
  EXPECT_EQ(config.rope_scaling, "llama3");
  EXPECT_EQ(config.rope_scaling_factor, 32.0);
  EXPECT_EQ(config.rope_low_freq_factor, 1.0);
  EXPECT_EQ(config.rope_high_freq_factor, 4.0);
  EXPECT_EQ(config.rope_original_max_position, 8192);
  EXPECT_TRUE(config.tie_embeddings);
  EXPECT_EQ(parse(v5).config, config);
}

// Gemma 3 text, 7 layers so the 5:1 local:global pattern shows, in 5.x and in 4.x keys.
constexpr const char* kGemma3Text5 = R"({
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "_sliding_window_pattern": 6,
  "attention_bias": false, "attn_logit_softcapping": null, "final_logit_softcapping": null, "head_dim": 16,
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 32, "intermediate_size": 64,
  "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                  "sliding_attention", "full_attention", "sliding_attention"],
  "max_position_embeddings": 131072, "num_attention_heads": 4, "num_hidden_layers": 7, "num_key_value_heads": 1,
  "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
  "rope_parameters": {"full_attention": {"rope_theta": 1000000.0, "rope_type": "default"},
                      "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
  "sliding_window": 512, "tie_word_embeddings": true, "use_bidirectional_attention": false, "vocab_size": 64})";

TEST(HfConfig, ReadsGemma3TextInBothKeyStyles) {
  const ModelConfig config = parse(kGemma3Text5).config;
  EXPECT_EQ(config.family, "gemma3");
  EXPECT_TRUE(config.qk_norm);
  EXPECT_TRUE(config.sandwich_norms);
  EXPECT_EQ(config.norm_weight_offset, 1.0f);
  EXPECT_EQ(config.embedding_scale, 0.0f);
  EXPECT_EQ(config.ffn_activation, FfnActivation::gelu_tanh);
  EXPECT_EQ(config.attention_scale, static_cast<float>(1.0 / 16.0));
  EXPECT_EQ(config.rope_theta, 1e6);
  EXPECT_EQ(config.rope_local_theta, 1e4);
  EXPECT_EQ(config.sliding_window, 512);
  EXPECT_EQ(config.sliding_window_pattern, 6);
  EXPECT_EQ(config.final_logit_softcap, 0.0f);
  EXPECT_TRUE(config.tie_embeddings);
  for (int64_t layer = 0; layer < 7; ++layer) EXPECT_EQ(config.layer_is_local(layer), layer != 5) << layer;

  const std::string v4 = R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "head_dim": 16,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 32, "intermediate_size": 64,
    "max_position_embeddings": 131072, "num_attention_heads": 4, "num_hidden_layers": 7, "num_key_value_heads": 1,
    "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
    "rope_scaling": null, "sliding_window": 512, "sliding_window_pattern": 6, "vocab_size": 64,
    "final_logit_softcapping": null, "attn_logit_softcapping": null})";
  EXPECT_EQ(parse(v4).config, config);
}

TEST(HfConfig, ReadsTheTextPartOfAMultimodalGemma3) {
  const std::string text = std::string(R"({"architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3", "vision_config": {"hidden_size": 1152}, "text_config": )") +
                           kGemma3Text5 + "}";
  const HfModelDescription description = parse(text);
  EXPECT_EQ(description.layout, HfWeightLayout::multimodal_text);
  EXPECT_EQ(description.config, parse(kGemma3Text5).config);
  EXPECT_EQ(lathe_name_from_hf("model.language_model.layers.3.mlp.up_proj.weight", description),
            "model.layers.3.mlp.up_proj.weight");
  EXPECT_EQ(lathe_name_from_hf("language_model.model.embed_tokens.weight", description), "model.embed_tokens.weight");
  EXPECT_EQ(lathe_name_from_hf("language_model.lm_head.weight", description), "lm_head.weight");
  EXPECT_EQ(lathe_name_from_hf("model.vision_tower.vision_model.post_layernorm.weight", description), "");
  EXPECT_EQ(lathe_name_from_hf("multi_modal_projector.mm_input_projection_weight", description), "");
  EXPECT_EQ(lathe_name_from_hf("model.layers.0.mlp.up_proj.weight", HfModelDescription{}),
            "model.layers.0.mlp.up_proj.weight");
}

TEST(HfConfig, ReadsQwen2BiasesAndGemma2Pattern) {
  const ModelConfig qwen2 = parse(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 64, "rope_theta": 1000000.0, "sliding_window": 32768,
    "use_sliding_window": false, "max_window_layers": 28, "tie_word_embeddings": true})")
                                .config;
  EXPECT_EQ(qwen2.family, "qwen2");
  EXPECT_TRUE(qwen2.attention_bias);
  EXPECT_FALSE(qwen2.qk_norm);
  EXPECT_EQ(qwen2.head_dim, 0);
  EXPECT_EQ(qwen2.resolved_head_dim(), 8);
  EXPECT_EQ(qwen2.sliding_window, 0);  // use_sliding_window false: the window is not used

  const ModelConfig gemma2 = parse(R"({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 64, "query_pre_attn_scalar": 64,
    "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0, "sliding_window": 4096,
    "hidden_activation": "gelu_pytorch_tanh"})")
                                 .config;
  EXPECT_EQ(gemma2.sliding_window_pattern, 2);  // 4.x: no layer_types, even layers slide
  EXPECT_TRUE(gemma2.layer_is_local(0));
  EXPECT_FALSE(gemma2.layer_is_local(1));
  EXPECT_EQ(gemma2.final_logit_softcap, 30.0f);
  EXPECT_EQ(gemma2.attn_logit_softcap, 50.0f);
  EXPECT_EQ(gemma2.attention_scale, 0.125f);
  EXPECT_FALSE(gemma2.qk_norm);
  EXPECT_TRUE(gemma2.tie_embeddings);  // Gemma2Config's default
}

ModelConfig exportable(const std::string& family) {
  ModelConfig config;
  config.family = family;
  config.vocab_size = 96;
  config.d_model = 32;
  config.n_layers = 7;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.head_dim = 8;
  config.ffn_dim = 48;
  config.max_seq_len = 512;
  config.norm_eps = 1e-6;
  config.rope_theta = 50000;
  if (family == "llama") {
    config.rope_scaling = "llama3";
    config.rope_scaling_factor = 8;
    config.rope_original_max_position = 128;
  }
  if (family == "mistral") config.sliding_window = 16;
  if (family == "qwen2") config.attention_bias = true;
  if (family == "qwen3" || family == "gemma3") config.qk_norm = true;
  if (family == "gemma2" || family == "gemma3") {
    config.sandwich_norms = true;
    config.norm_weight_offset = 1;
    config.embedding_scale = 0;
    config.ffn_activation = FfnActivation::gelu_tanh;
    config.attention_scale = static_cast<float>(1.0 / std::sqrt(24.0));
    config.sliding_window = 8;
    config.sliding_window_pattern = family == "gemma2" ? 2 : 3;
    config.tie_embeddings = true;
  }
  if (family == "gemma2") {
    config.final_logit_softcap = 30;
    config.attn_logit_softcap = 50;
  }
  if (family == "gemma3") config.rope_local_theta = 10000;
  if (family == "mixtral" || family == "qwen2_moe" || family == "qwen3_moe" || family == "olmoe") {
    config.moe_experts = 6;
    config.moe_top_k = 2;
    config.moe_aux_loss_coef = 0.02;
    config.moe_ffn_dim = family == "qwen2_moe" || family == "qwen3_moe" ? 20 : 0;
    config.moe_renormalize = family != "olmoe";
    config.qk_norm = family == "qwen3_moe" || family == "olmoe";
    config.qk_norm_full_width = family == "olmoe";
  }
  if (family == "qwen2_moe") {
    config.attention_bias = true;
    config.moe_shared_ffn_dim = 30;
    config.moe_shared_gate = true;
    config.moe_dense_layers = "0,3";
  }
  if (family == "qwen3_moe") config.moe_layer_step = 2;
  if (family == "gpt_oss") {  // every layer MoE, q/k/v/o biases, layers alternate sliding / full
    config.moe_experts = 6;
    config.moe_top_k = 2;
    config.moe_aux_loss_coef = 0.02;
    config.attention_bias = true;
    config.sliding_window = 8;
    config.sliding_window_pattern = 2;
  }
  return config;
}

class HfConfigRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(HfConfigRoundTrip, ExportThenImportIsTheSameConfig) {
  const ModelConfig config = exportable(GetParam());
  const Json json = hf_json_from_model_config(config);
  EXPECT_EQ(json.get("architectures").items()[0].as_string(), hf_architecture_for_family(GetParam()));
  ModelConfig back = model_config_from_hf_json(Json::parse(json.dump()), "exported").config;
  EXPECT_EQ(back.resolved_head_dim(), config.resolved_head_dim());
  back.head_dim = config.head_dim;
  EXPECT_EQ(back, config) << json.dump();
}

INSTANTIATE_TEST_SUITE_P(Families, HfConfigRoundTrip,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "mixtral",
                                           "qwen2_moe", "qwen3_moe", "olmoe", "gpt_oss"));

// Keys a config.json leaves out take the transformers config class's default for that model
// type (transformers 5.24: MixtralConfig, Qwen3MoeConfig, Qwen2MoeConfig, OlmoeConfig).
TEST(HfConfig, MissingMoeKeysTakeTheTransformersDefaults) {
  const std::string base = R"("hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 16, "vocab_size": 64)";  // 16 heads: a multiple of every default kv-head count
  const ModelConfig mixtral = parse(R"({"model_type": "mixtral", )" + base + "}").config;
  EXPECT_EQ(mixtral.moe_experts, 8);
  EXPECT_EQ(mixtral.moe_top_k, 2);
  EXPECT_EQ(mixtral.resolved_moe_ffn_dim(), 64);  // Mixtral's experts are intermediate_size wide
  EXPECT_TRUE(mixtral.moe_renormalize);
  EXPECT_EQ(mixtral.moe_aux_loss_coef, 0.0);  // transformers adds the aux loss only with output_router_logits
  EXPECT_EQ(mixtral.n_kv_heads, 8);           // MixtralConfig's defaults, not the common ones
  EXPECT_EQ(mixtral.norm_eps, 1e-5);
  EXPECT_EQ(mixtral.rope_theta, 1e6);
  EXPECT_EQ(parse(R"({"model_type": "mixtral", "output_router_logits": true, )" + base + "}").config.moe_aux_loss_coef,
            0.001);
  EXPECT_EQ(parse(R"({"model_type": "mixtral", "num_key_value_heads": null, )" + base + "}").config.n_kv_heads, 16);
  // Either spelling of the expert count (Qwen3MoeConfig's attribute map writes num_local_experts).
  EXPECT_EQ(parse(R"({"model_type": "qwen3_moe", "num_local_experts": 12, )" + base + "}").config.moe_experts, 12);
  const ModelConfig qwen3 = parse(R"({"model_type": "qwen3_moe", "mlp_only_layers": [1], )" + base + "}").config;
  EXPECT_EQ(qwen3.moe_experts, 128);
  EXPECT_EQ(qwen3.moe_top_k, 8);
  EXPECT_EQ(qwen3.resolved_moe_ffn_dim(), 768);
  EXPECT_FALSE(qwen3.moe_renormalize);  // norm_topk_prob defaults to False
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_TRUE(qwen3.layer_is_moe(0));
  EXPECT_FALSE(qwen3.layer_is_moe(1));
  const ModelConfig qwen2 = parse(R"({"model_type": "qwen2_moe", "decoder_sparse_step": 2, )" + base + "}").config;
  EXPECT_EQ(qwen2.moe_experts, 60);
  EXPECT_EQ(qwen2.moe_top_k, 4);
  EXPECT_EQ(qwen2.resolved_moe_ffn_dim(), 1408);
  EXPECT_EQ(qwen2.moe_shared_ffn_dim, 5632);
  EXPECT_TRUE(qwen2.moe_shared_gate);
  EXPECT_TRUE(qwen2.attention_bias);
  EXPECT_FALSE(qwen2.layer_is_moe(0));
  EXPECT_TRUE(qwen2.layer_is_moe(1));
  const ModelConfig olmoe = parse(R"({"model_type": "olmoe", )" + base + "}").config;
  EXPECT_EQ(olmoe.moe_experts, 64);
  EXPECT_EQ(olmoe.moe_top_k, 8);
  EXPECT_EQ(olmoe.resolved_moe_ffn_dim(), 64);
  EXPECT_FALSE(olmoe.moe_renormalize);
  EXPECT_EQ(parse(R"({"model_type": "olmoe", "output_router_logits": true, )" + base + "}").config.moe_aux_loss_coef,
            0.01);
  EXPECT_TRUE(olmoe.qk_norm_full_width);
}

// GptOssConfig (transformers 5.24 configuration_gpt_oss.py): its defaults, and what lathe refuses.
TEST(HfConfig, GptOssDefaultsAndRefusals) {
  const std::string base = R"("hidden_size": 64, "intermediate_size": 48, "num_hidden_layers": 4,
    "num_attention_heads": 16, "vocab_size": 64, "sliding_window": 128)";
  const std::string rope = R"("rope_parameters": {"rope_type": "default"}, )";
  const ModelConfig config = parse(R"({"model_type": "gpt_oss", )" + rope + base + "}").config;
  EXPECT_EQ(config.family, "gpt_oss");
  EXPECT_EQ(config.moe_experts, 128);
  EXPECT_EQ(config.moe_top_k, 4);
  EXPECT_EQ(config.resolved_moe_ffn_dim(), 48);  // the experts are intermediate_size wide
  EXPECT_TRUE(config.moe_renormalize);           // softmax over the chosen k
  EXPECT_EQ(config.moe_aux_loss_coef, 0.0);      // output_router_logits defaults to false
  EXPECT_EQ(config.n_kv_heads, 8);
  EXPECT_EQ(config.norm_eps, 1e-5);
  EXPECT_EQ(config.rope_theta, 150000.0);
  EXPECT_TRUE(config.attention_bias);
  // No layer_types: GptOssConfig makes even layers sliding and odd ones full, lathe's pattern 2.
  EXPECT_EQ(config.sliding_window, 128);
  EXPECT_EQ(std::vector<bool>({config.layer_is_local(0), config.layer_is_local(1), config.layer_is_local(2),
                               config.layer_is_local(3)}),
            std::vector<bool>({true, false, true, false}));
  // Without the key the window is GptOssConfig's 128; null means none.
  const std::string no_window = R"("hidden_size": 64, "intermediate_size": 48, "num_hidden_layers": 4,
    "num_attention_heads": 16, "vocab_size": 64)";
  EXPECT_EQ(parse(R"({"model_type": "gpt_oss", )" + rope + no_window + "}").config, config);
  EXPECT_EQ(
      parse(R"({"model_type": "gpt_oss", "sliding_window": null, )" + rope + no_window + "}").config.sliding_window, 0);
  EXPECT_EQ(
      parse(R"({"model_type": "gpt_oss", "swiglu_alpha": 1.702, "swiglu_limit": 7.0, )" + rope + base + "}").config,
      config);
  expect_error(R"({"model_type": "gpt_oss", )" + base + "}",
               "no \"rope_parameters\", so GptOssForCausalLM defaults to rope_type \"yarn\"");
  // GPT-OSS's own YaRN (factor 32 over 4096 positions, untruncated ramp) loads.
  const ModelConfig yarn =
      parse(R"({"model_type": "gpt_oss", "rope_parameters": {"rope_type": "yarn", "factor": 32.0, )"
            R"("beta_fast": 32.0, "beta_slow": 1.0, "truncate": false, )"
            R"("original_max_position_embeddings": 4096, "rope_theta": 150000}, )" +
            base + "}")
          .config;
  EXPECT_EQ(yarn.rope_scaling, "yarn");
  EXPECT_EQ(yarn.rope_scaling_factor, 32.0);
  EXPECT_EQ(yarn.rope_original_max_position, 4096);
  EXPECT_FALSE(yarn.rope_yarn_truncate);
  expect_error(
      R"({"model_type": "gpt_oss", "rope_parameters": {"rope_type": "longrope", "factor": 32.0}, )" + base + "}",
      "\"rope_parameters\" rope_type \"longrope\" is not supported");
  expect_error(R"({"model_type": "gpt_oss", "quantization_config": {"quant_method": "mxfp4"}, )" + rope + base + "}",
               "\"quantization_config\" (quant_method \"mxfp4\") is not supported");
  expect_error(R"({"model_type": "gpt_oss", "swiglu_limit": 5.0, )" + rope + base + "}",
               "\"swiglu_limit\"=5 is not supported (lathe's gpt_oss layer hard-wires 7)");
  expect_error(R"({"model_type": "gpt_oss", "swiglu_alpha": 1.5, )" + rope + base + "}",
               "\"swiglu_alpha\"=1.5 is not supported");
  expect_error(R"({"model_type": "gpt_oss", "attention_bias": false, )" + rope + base + "}",
               "\"attention_bias\"=false is not supported");
  expect_error(R"({"model_type": "gpt_oss", "layer_types": ["full_attention", "sliding_attention",
                   "full_attention", "sliding_attention"], )" +
                   rope + base + "}",
               "is not a pattern lathe supports");
}

// The defaults of transformers 5.24's DeepseekV3Config / DeepseekV2Config (configuration_deepseek_v3.py,
// configuration_deepseek_v2.py) for every key a config.json may leave out.
TEST(HfConfig, MissingDeepseekKeysTakeTheTransformersDefaults) {
  const std::string base = R"("vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 4,
      "num_attention_heads": 4)";
  const ModelConfig v3 = parse(R"({"model_type": "deepseek_v3", )" + base + "}").config;
  EXPECT_EQ(v3.family, "deepseek_v3");
  EXPECT_EQ(v3.q_lora_rank, 1536);
  EXPECT_EQ(v3.kv_lora_rank, 512);
  EXPECT_EQ(v3.qk_nope_head_dim, 128);
  EXPECT_EQ(v3.qk_rope_head_dim, 64);
  EXPECT_EQ(v3.v_head_dim, 128);
  EXPECT_EQ(v3.head_dim, 64);  // __post_init__: head_dim = qk_rope_head_dim
  EXPECT_EQ(v3.moe_experts, 256);
  EXPECT_EQ(v3.moe_top_k, 8);
  EXPECT_EQ(v3.moe_ffn_dim, 2048);
  EXPECT_EQ(v3.moe_shared_ffn_dim, 2048);  // n_shared_experts 1
  EXPECT_EQ(v3.moe_first_dense_layers, 3);
  EXPECT_EQ(v3.moe_routed_scaling, 2.5);
  EXPECT_EQ(v3.moe_groups, 8);
  EXPECT_EQ(v3.moe_topk_groups, 4);
  EXPECT_EQ(v3.moe_group_score_experts, 2);
  EXPECT_EQ(v3.moe_router_scoring, "sigmoid");
  EXPECT_TRUE(v3.moe_renormalize);        // norm_topk_prob
  EXPECT_GT(v3.moe_bias_update_rate, 0);  // e_score_correction_bias exists
  EXPECT_EQ(v3.moe_aux_loss_coef, 0);
  EXPECT_TRUE(v3.rope_interleave);
  EXPECT_EQ(v3.mtp_layers, 1);
  EXPECT_EQ(v3.norm_eps, 1e-6);
  EXPECT_FALSE(v3.tie_embeddings);
  EXPECT_EQ(v3.rope_theta, 10000.0);

  const ModelConfig v2 =
      parse(R"({"model_type": "deepseek_v2", "num_experts_per_tok": 6, "q_lora_rank": null, )" + base + "}").config;
  EXPECT_EQ(v2.q_lora_rank, 0);  // null: a full q_proj (V2-Lite)
  EXPECT_EQ(v2.moe_experts, 64);
  EXPECT_EQ(v2.moe_ffn_dim, 1407);
  EXPECT_EQ(v2.moe_shared_ffn_dim, 2 * 1407);
  EXPECT_EQ(v2.moe_first_dense_layers, 0);
  EXPECT_EQ(v2.moe_routed_scaling, 1.0);
  EXPECT_EQ(v2.moe_groups, 1);  // topk_method "greedy"
  EXPECT_EQ(v2.moe_router_scoring, "softmax");
  EXPECT_FALSE(v2.moe_renormalize);  // V2's router never renormalises
  EXPECT_EQ(v2.moe_bias_update_rate, 0);
  EXPECT_TRUE(v2.rope_interleave);
  EXPECT_EQ(v2.mtp_layers, 0);
  const ModelConfig grouped =
      parse(R"({"model_type": "deepseek_v2", "num_experts_per_tok": 6, "topk_method": "group_limited_greedy", )"
            R"("n_group": 8, "topk_group": 3, )" +
            base + "}")
          .config;
  EXPECT_EQ(grouped.moe_groups, 8);
  EXPECT_EQ(grouped.moe_topk_groups, 3);
  EXPECT_EQ(grouped.moe_group_score_experts, 1);  // the best expert of a group scores it
  // YaRN with DeepSeek-V3's published values
  const ModelConfig yarn =
      parse(R"({"model_type": "deepseek_v3", "max_position_embeddings": 163840, )"
            R"("rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, )"
            R"("beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}, )" +
            base + "}")
          .config;
  EXPECT_EQ(yarn.rope_scaling, "yarn");
  EXPECT_EQ(yarn.rope_scaling_factor, 40.0);
  EXPECT_EQ(yarn.rope_yarn_mscale_all_dim, 1.0);
}

TEST(HfConfig, DeepseekOptionsLatheLacksAreRefusedByKey) {
  const std::string base = R"("vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 4,
      "num_attention_heads": 4)";
  expect_error(R"({"model_type": "deepseek_v3", "scoring_func": "softmax", )" + base + "}",
               "\"scoring_func\"=\"softmax\" is not supported");
  expect_error(R"({"model_type": "deepseek_v3", "topk_method": "group_limited_greedy", )" + base + "}",
               "\"topk_method\"=\"group_limited_greedy\" is not supported");
  expect_error(R"({"model_type": "deepseek_v2", "num_experts_per_tok": 6, "topk_method": "noaux_tc", )" + base + "}",
               "\"topk_method\"=\"noaux_tc\" is not supported");
  expect_error(R"({"model_type": "deepseek_v2", )" + base + "}", "\"num_experts_per_tok\" must be given");
  expect_error(R"({"model_type": "deepseek_v3", "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", )"
               R"("weight_block_size": [128, 128]}, )" +
                   base + "}",
               "\"quantization_config\" (quant_method \"fp8\") is not supported");
  expect_error(R"({"model_type": "deepseek_v3", "n_group": 3, )" + base + "}", "\"n_group\"=3");
}

TEST(HfConfig, ConfigTextWritesFloatKeysAsFloats) {
  const std::string text = hf_config_text(hf_json_from_model_config(exportable("gemma2")));
  EXPECT_NE(text.find("\"final_logit_softcapping\": 30.0,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"rope_theta\": 50000.0"), std::string::npos) << text;
  EXPECT_NE(text.find("\"num_hidden_layers\": 7,"), std::string::npos) << text;
  EXPECT_EQ(model_config_from_hf_json(Json::parse(text), "text").config, exportable("gemma2"));
  // DeepSeek's scaling of the routed experts is a float in transformers' strict config classes
  // (configs/deepseek.yaml's 1 was written as an integer, which DeepseekV3Config rejects).
  ModelConfig deepseek = parse(R"({"model_type": "deepseek_v3", "vocab_size": 64, "hidden_size": 32,
      "intermediate_size": 48, "num_hidden_layers": 4, "num_attention_heads": 4, "q_lora_rank": null,
      "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "n_routed_experts": 8,
      "n_group": 1, "topk_group": 1, "num_experts_per_tok": 2, "moe_intermediate_size": 16})").config;
  deepseek.moe_routed_scaling = 1.0;
  const std::string deepseek_text = hf_config_text(hf_json_from_model_config(deepseek));
  EXPECT_NE(deepseek_text.find("\"routed_scaling_factor\": 1.0"), std::string::npos) << deepseek_text;
}

// An all-MoE model whose experts have their own width (configs/moe.yaml: ffn_dim 1024, experts
// 512) in an architecture whose experts are intermediate_size wide: the dense width is unused,
// the export writes the experts' width, and the import reads the same model back.
TEST(HfConfig, ExportsTheExpertsWidthWhereEveryLayerIsMoe) {
  for (const char* family : {"mixtral", "olmoe", "gpt_oss"}) {
    ModelConfig config = exportable(family);
    config.moe_ffn_dim = config.ffn_dim / 2;
    const Json json = hf_json_from_model_config(config);
    EXPECT_EQ(json.get("intermediate_size").as_int(), config.ffn_dim / 2) << family;
    ModelConfig back = model_config_from_hf_json(Json::parse(json.dump()), "exported").config;
    EXPECT_EQ(back.resolved_moe_ffn_dim(), config.resolved_moe_ffn_dim()) << family;
    EXPECT_EQ(back.parameter_count(), config.parameter_count()) << family;
    back.ffn_dim = config.ffn_dim, back.moe_ffn_dim = config.moe_ffn_dim, back.head_dim = config.head_dim;
    EXPECT_EQ(back, config) << family << ": " << json.dump();
  }
}

TEST(HfConfig, ExportRefusesWhatTheArchitectureCannotExpress) {
  ModelConfig config = exportable("llama");
  config.qk_norm = true;
  EXPECT_THROW(hf_json_from_model_config(config), Error);
  config = exportable("qwen3");
  config.sliding_window = 4;
  EXPECT_THROW(hf_json_from_model_config(config), Error);
  config = exportable("gemma3");
  config.rope_scaling = "llama3";
  EXPECT_THROW(hf_json_from_model_config(config), Error);
}

TEST(HfConfig, UnsupportedOptionsAreOneClearErrorEach) {
  const std::string base = R"("hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 64)";
  expect_error(R"({"architectures": ["FalconForCausalLM"], "model_type": "falcon", )" + base + "}",
               "architecture \"FalconForCausalLM\" (model_type \"falcon\") is not supported");
  expect_error(R"({"model_type": "llama", "hidden_act": "gelu", )" + base + "}",
               "\"hidden_act\"=\"gelu\" is not supported");
  expect_error(R"({"model_type": "llama", "mlp_bias": true, )" + base + "}", "\"mlp_bias\"=true is not supported");
  expect_error(R"({"model_type": "llama", "attention_bias": true, )" + base + "}",
               "\"attention_bias\"=true is not supported for LlamaForCausalLM");
  expect_error(R"({"model_type": "llama", "rope_scaling": {"rope_type": "longrope", "factor": 2.0}, )" + base + "}",
               "\"rope_scaling\" rope_type \"longrope\" is not supported");
  expect_error(R"({"model_type": "llama", "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}, )" + base + "}",
               "\"rope_parameters\" rope_type \"dynamic\" is not supported");
  expect_error(R"({"model_type": "qwen2", "use_sliding_window": true, "num_key_value_heads": 4, )" + base + "}",
               "\"use_sliding_window\"=true is not supported");
  expect_error(R"({"model_type": "gemma3_text", "sliding_window": 4,
                   "layer_types": ["full_attention", "sliding_attention"], )" +
                   base + "}",
               "is not a pattern lathe supports");
  expect_error(
      R"({"model_type": "gemma3_text", "sliding_window": 4, "layer_types": ["sliding_attention"], )" + base + "}",
      "\"layer_types\" must list one type per layer (2)");
  expect_error(R"({"model_type": "llama", "partial_rotary_factor": 0.5, )" + base + "}",
               "\"partial_rotary_factor\"=0.5 is not supported");
  expect_error(R"({"model_type": "llama", "hidden_size": 32})", "missing key \"vocab_size\"");
  expect_error(R"({"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 0,
                   "num_attention_heads": 4, "vocab_size": 64})",
               "\"num_hidden_layers\" must be positive, found 0");
  expect_error(R"({"model_type": "llama", "head_dim": 5, )" + base + "}", "head_dim 5 must be even");
  expect_error(R"({"model_type": "llama", "hidden_size": "32", "vocab_size": 3})",
               "\"hidden_size\" must be a number, found \"32\"");
  expect_error(R"({"architectures": ["MistralForCausalLM"], "model_type": "llama", )" + base + "}",
               "does not match model_type \"llama\"");
  expect_error(R"({"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"]})",
               "needs a \"text_config\" object");
  expect_error(R"({"model_type": "mixtral", "router_jitter_noise": 0.1, "num_key_value_heads": 4, )" + base + "}",
               "\"router_jitter_noise\"=0.1 is not supported");
  expect_error(R"({"model_type": "qwen3_moe", "scoring_func": "sigmoid", "num_key_value_heads": 4, )" + base + "}",
               "\"scoring_func\"=\"sigmoid\" is not supported");
  expect_error(R"({"model_type": "olmoe", "clip_qkv": 8.0, "num_key_value_heads": 4, )" + base + "}",
               "\"clip_qkv\"=8 is not supported");
  expect_error(R"({"model_type": "qwen2_moe", "qkv_bias": false, "num_key_value_heads": 4, )" + base + "}",
               "\"qkv_bias\"=false is not supported");
  expect_error(
      R"({"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 5, "num_key_value_heads": 4, )" +
          base + "}",
      "\"num_experts_per_tok\"=5 must be in [1, num_local_experts=4]");
  expect_error(R"({"model_type": "qwen3_moe", "mlp_only_layers": [0, -1], "num_key_value_heads": 4, )" + base + "}",
               "\"mlp_only_layers\" must list non-negative layer indices, found -1");
}

// A config.json that leaves optional keys out means transformers' defaults for that model type,
// never lathe's own. tests/golden/hf_defaults/<model_type>.json (tests/hf_oracle/
// make_config_defaults.py) holds a config with only the sizes ("minimal") and the same config as
// transformers 5.24 completes it with its class defaults ("full"); both must read as one model.
TEST(HfConfig, MissingKeysTakeTransformersDefaultsOfTheModelType) {
  const std::filesystem::path directory = LATHE_SOURCE_DIR "/tests/golden/hf_defaults";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().filename().string());
    const Json record = Json::parse(read_file_contents(entry.path().string()));
    ModelConfig minimal = model_config_from_hf_json(*record.find("minimal"), "minimal").config;
    ModelConfig full = model_config_from_hf_json(*record.find("full"), "full").config;
    // A head_dim left to hidden_size / num_attention_heads and one given equal to it are one model.
    minimal.head_dim = minimal.resolved_head_dim();
    full.head_dim = full.resolved_head_dim();
    EXPECT_EQ(first_config_difference(minimal, full), "");
    EXPECT_TRUE(minimal == full);
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

}  // namespace
}  // namespace lathe
