// Mamba-2 config.json <-> ModelConfig (models/hf/hf_mamba2.h) and its checkpoint names: the keys
// of tests/golden/hf/mamba2/config.json (written by transformers 5.24), the defaults of
// Mamba2Config (configuration_mamba2.py) for keys a config leaves out, time_step_limit's infinity
// in its spellings, one clear error per option lathe lacks (a Mamba-1 config included), the export
// round trip, and a save/load through the "backbone." names.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "expect_error.h"
#include "lathe/io/safetensors_checkpoint.h"
#include "lathe/models/hf/hf_checkpoint.h"
#include "lathe/models/hf/hf_config.h"
#include "scratch_directory.h"

namespace lathe {
namespace {

ModelConfig parse(const std::string& text) { return model_config_from_hf_json(Json::parse(text), "cfg.json").config; }

const std::string kSizes = R"("model_type": "mamba2", "vocab_size": 64, "hidden_size": 16, "num_hidden_layers": 2,
    "num_heads": 4, "head_dim": 8)";
const std::string kShape = kSizes + R"(, "n_groups": 2, "state_size": 6)";

TEST(HfMamba2, ReadsTheKeysTransformersWrote) {
  const std::string path = LATHE_SOURCE_DIR "/tests/golden/hf/mamba2/config.json";
  const Json json = Json::parse(read_file_contents(path));
  const ModelConfig c = model_config_from_hf_json(json, path).config;
  auto number = [&](const char* key) { return json.find(key)->as_number(); };
  EXPECT_EQ(c.family, "mamba2");
  EXPECT_EQ(c.vocab_size, number("vocab_size"));
  EXPECT_EQ(c.d_model, number("hidden_size"));
  EXPECT_EQ(c.n_layers, number("num_hidden_layers"));
  EXPECT_EQ(c.n_heads, number("num_heads"));
  EXPECT_EQ(c.n_kv_heads, c.n_heads);
  EXPECT_EQ(c.head_dim, number("head_dim"));
  EXPECT_EQ(c.n_heads * c.head_dim, number("expand") * number("hidden_size"));
  EXPECT_EQ(c.ssm_state_size, number("state_size"));
  EXPECT_EQ(c.ssm_groups, number("n_groups"));
  EXPECT_EQ(c.ssm_conv_kernel, number("conv_kernel"));
  EXPECT_EQ(c.ssm_chunk_size, number("chunk_size"));
  EXPECT_EQ(c.ssm_conv_bias, json.find("use_conv_bias")->as_bool());
  EXPECT_EQ(c.ssm_projection_bias, json.find("use_bias")->as_bool());
  EXPECT_EQ(c.norm_eps, number("layer_norm_epsilon"));
  EXPECT_EQ(c.init_std, number("initializer_range"));
  EXPECT_EQ(c.tie_embeddings, json.find("tie_word_embeddings")->as_bool());
  EXPECT_EQ(c.residual_in_fp32, json.find("residual_in_fp32")->as_bool());
  const std::vector<Json>& limit = json.find("time_step_limit")->items();
  EXPECT_EQ(c.ssm_dt_min, limit[0].as_number());
  EXPECT_EQ(c.ssm_dt_max, limit[1].as_number());
  EXPECT_EQ(c.ssm_dt_init_min, number("time_step_min"));
  EXPECT_EQ(c.ssm_dt_init_max, number("time_step_max"));
  EXPECT_EQ(c.ssm_dt_init_floor, number("time_step_floor"));
}

// Read off configuration_mamba2.py's class fields (the golden hf_defaults/mamba2.json checks the
// same against transformers itself, through hf_config_test).
TEST(HfMamba2, MissingKeysTakeTheTransformersDefaults) {
  const ModelConfig c = parse(R"({"model_type": "mamba2"})");
  EXPECT_EQ(c.vocab_size, 32768);
  EXPECT_EQ(c.d_model, 4096);
  EXPECT_EQ(c.n_layers, 64);
  EXPECT_EQ(c.n_heads, 128);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.ssm_state_size, 128);
  EXPECT_EQ(c.ssm_groups, 8);
  EXPECT_EQ(c.ssm_conv_kernel, 4);
  EXPECT_TRUE(c.ssm_conv_bias);
  EXPECT_FALSE(c.ssm_projection_bias);
  EXPECT_EQ(c.ssm_chunk_size, 256);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.init_std, 0.1);
  EXPECT_TRUE(c.residual_in_fp32);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.ssm_dt_min, 0.0);
  EXPECT_EQ(c.ssm_dt_max, 0.0);  // inf
  EXPECT_EQ(c.ssm_dt_init_min, 0.001);
  EXPECT_EQ(c.ssm_dt_init_max, 0.1);
  EXPECT_EQ(c.ssm_dt_init_floor, 1e-4);
  EXPECT_EQ(c.max_seq_len, int64_t{1} << 20);
}

TEST(HfMamba2, TimeStepLimitInfinityInEverySpelling) {
  for (const char* upper : {R"({"__float__": "Infinity"})", "null"}) {
    const ModelConfig c = parse("{" + kShape + R"(, "time_step_limit": [0.01, )" + upper + "]}");
    EXPECT_EQ(c.ssm_dt_min, 0.01) << upper;
    EXPECT_EQ(c.ssm_dt_max, 0.0) << upper;
  }
  EXPECT_EQ(parse("{" + kShape + R"(, "time_step_limit": [0, 3]})").ssm_dt_max, 3.0);
}

TEST(HfMamba2, RefusesWhatLatheLacksWithOneLineNamingTheKey) {
  auto refused = [](const std::string& text, const std::string& part) { expect_error([&] { parse(text); }, part); };
  refused(R"({"model_type": "mamba", "architectures": ["MambaForCausalLM"], "hidden_size": 16})",
          "(model_type \"mamba\") is not supported");
  refused("{" + kShape + R"(, "expand": 3})", "hidden_size * expand (16 * 3) must equal num_heads * head_dim (4 * 8)");
  refused("{" + kSizes + R"(, "n_groups": 3})", "\"n_groups\"=3 must divide num_heads=4");
  refused("{" + kShape + R"(, "hidden_act": "gelu"})", "\"hidden_act\" \"gelu\" is not supported");
  refused("{" + kShape + R"(, "time_step_limit": [0.5, 0.1]})", "\"time_step_limit\" [0.5,0.1] must have");
  refused("{" + kShape + R"(, "time_step_limit": [0.0]})", "\"time_step_limit\" must be [min, max]");
  refused("{" + kShape + R"(, "time_step_limit": [0.0, "big"]})", "\"time_step_limit\" entries must be numbers");
  refused("{" + kSizes + R"(, "n_groups": 2, "state_size": 0})", "\"state_size\" must be positive");
}

TEST(HfMamba2, ExportReadsBackAsTheSameModel) {
  for (const char* limit : {"", R"(, "time_step_limit": [0.0, 0.5])", R"(, "time_step_limit": [0.01, null])"}) {
    SCOPED_TRACE(limit);
    const ModelConfig original = parse("{" + kShape + R"(, "use_bias": true, "use_conv_bias": false,
        "tie_word_embeddings": true, "residual_in_fp32": false, "chunk_size": 64, "layer_norm_epsilon": 1e-6, "time_step_max": 1.0)" +
                                       limit + "}");
    const std::string text = hf_config_text(hf_json_from_model_config(original));
    const ModelConfig again = parse(text);
    EXPECT_EQ(first_config_difference(original, again), "") << text;
    EXPECT_TRUE(original == again);
    // transformers 5.x's strict config class rejects an integer where it types a float.
    EXPECT_NE(text.find("\"time_step_max\": 1.0,"), std::string::npos) << text;
    if (std::string(limit).find("0.5") != std::string::npos) {
      EXPECT_NE(text.find("    0.0,\n    0.5\n"), std::string::npos) << text;
    }
  }
}

TEST(HfMamba2, CheckpointRootsTensorsAtBackbone) {
  ModelConfig config = parse("{" + kShape + R"(, "use_bias": true})");
  config.max_seq_len = 32;
  TransformerModel model(config);
  model.initialize(7);
  const ScratchDirectory scratch;
  const std::string directory = scratch.path() + "/hf";
  save_hf_model(model, directory);
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(directory);
  std::set<std::string> names(checkpoint.names().begin(), checkpoint.names().end());
  for (const char* name :
       {"backbone.embeddings.weight", "backbone.norm_f.weight", "lm_head.weight", "backbone.layers.1.norm.weight",
        "backbone.layers.0.mixer.in_proj.weight", "backbone.layers.0.mixer.in_proj.bias",
        "backbone.layers.0.mixer.conv1d.weight", "backbone.layers.0.mixer.conv1d.bias",
        "backbone.layers.0.mixer.dt_bias", "backbone.layers.0.mixer.A_log", "backbone.layers.0.mixer.D",
        "backbone.layers.0.mixer.norm.weight", "backbone.layers.0.mixer.out_proj.weight",
        "backbone.layers.0.mixer.out_proj.bias"})
    EXPECT_TRUE(names.count(name)) << name;
  EXPECT_EQ(names.size(), 2 + 1 + 2 * 11u);
  const TransformerModel loaded = load_hf_model(directory);
  ASSERT_EQ(loaded.parameters().size(), model.parameters().size());
  for (size_t i = 0; i < model.parameters().size(); ++i)
    EXPECT_EQ(to_vector<float>(loaded.parameters()[i].var->value), to_vector<float>(model.parameters()[i].var->value))
        << model.parameters()[i].name;
}

}  // namespace
}  // namespace lathe
