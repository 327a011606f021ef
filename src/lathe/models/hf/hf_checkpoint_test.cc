// Hugging Face model directories: save -> load round trips for every family (f32 exact, bf16
// rounded, sharded), identical logits after the round trip, Gemma 3 multimodal names, and one
// error naming the tensor for each kind of bad checkpoint.
#include "lathe/models/hf/hf_checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "expect_error.h"
#include "lathe/core/rng.h"
#include "lathe/io/durable_file.h"
#include "lathe/io/safetensors_checkpoint.h"
#include "scratch_directory.h"
#include "test_seed.h"
#include "tiny_model.h"

namespace lathe {
namespace {

ModelConfig tiny_config(const std::string& family) {
  ModelConfig config = model_config_from_hf_json(Json::parse(R"({"model_type": "llama", "vocab_size": 40,
      "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 3, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 4, "max_position_embeddings": 64})"),
                                                 "tiny")
                           .config;
  config.family = family;
  if (family == "qwen2") config.attention_bias = true;
  if (family == "qwen3" || family == "gemma3") config.qk_norm = true;
  if (family == "mistral") config.sliding_window = 5;
  if (family == "gemma2" || family == "gemma3") {
    config.sandwich_norms = true;
    config.norm_weight_offset = 1;
    config.embedding_scale = 0;
    config.ffn_activation = FfnActivation::gelu_tanh;
    config.attention_scale = 0.5f;
    config.sliding_window = 4;
    config.sliding_window_pattern = 2;
    config.tie_embeddings = true;
  }
  if (family == "gemma3") config.rope_local_theta = 100;
  if (family == "mixtral" || family == "qwen2_moe" || family == "qwen3_moe" || family == "olmoe") {
    config.moe_experts = 3;
    config.moe_top_k = 2;
    config.moe_ffn_dim = family == "qwen2_moe" || family == "qwen3_moe" ? 10 : 0;  // Mixtral, OLMoE: ffn_dim
    config.moe_renormalize = family == "mixtral";
    config.qk_norm = family == "qwen3_moe" || family == "olmoe";
    config.qk_norm_full_width = family == "olmoe";
  }
  if (family == "qwen2_moe") {
    config.attention_bias = true;
    config.moe_shared_ffn_dim = 14;
    config.moe_shared_gate = true;
    config.moe_dense_layers = "1";
  }
  if (family == "qwen3_moe") config.moe_layer_step = 2;
  if (family == "gemma4") {  // layers 0, 1 slide, layer 2 is global (6 wide, k = v); PLE 4; layer_scalar
    make_tiny_gemma4(config);
    config.sliding_window = 4;
    config.sliding_window_pattern = 3;
    config.global_head_dim = 6;
    config.per_layer_input_dim = 4;
    config.final_logit_softcap = 10;
  }
  if (family == "deepseek_v2" || family == "deepseek_v3") {  // as an import of its config.json sets them
    const bool v3 = family == "deepseek_v3";
    config.kv_lora_rank = 6;
    config.q_lora_rank = v3 ? 5 : 0;
    config.qk_nope_head_dim = 3;
    config.qk_rope_head_dim = 2;
    config.v_head_dim = 5;
    config.head_dim = 2;
    config.n_kv_heads = 4;
    config.rope_interleave = true;
    config.moe_experts = 4;
    config.moe_top_k = 2;
    config.moe_ffn_dim = 6;
    config.moe_shared_ffn_dim = v3 ? 6 : 12;
    config.moe_first_dense_layers = 1;
    config.moe_router_scoring = v3 ? "sigmoid" : "softmax";
    config.moe_renormalize = v3;
    config.moe_routed_scaling = v3 ? 2.5 : 1.5;
    config.moe_groups = 2;
    config.moe_topk_groups = 1;
    config.moe_group_score_experts = v3 ? 2 : 1;
    config.moe_bias_update_rate = v3 ? 0.001 : 0.0;
    config.moe_aux_loss_coef = 0;
    config.mtp_layers = v3 ? 1 : 0;
    if (v3) {
      config.rope_scaling = "yarn";
      config.rope_scaling_factor = 4;
      config.rope_original_max_position = 16;
      config.rope_yarn_mscale = 1;
      config.rope_yarn_mscale_all_dim = 1;
    }
  }
  if (family == "gpt_oss") {
    config.moe_experts = 3;
    config.moe_top_k = 2;
    config.attention_bias = true;
    config.sliding_window = 4;
    config.sliding_window_pattern = 2;
  }
  return config;
}

// Random values everywhere (biases and norms too), so a mix-up of any two tensors shows.
TransformerModel random_model(const ModelConfig& config, uint64_t seed) {
  TransformerModel model(config);
  for (size_t i = 0; i < model.parameters().size(); ++i)
    fill_normal(model.parameters()[i].var->value, seed, 0.0, 0.5, i);
  return model;
}

void expect_same_parameters(const TransformerModel& a, const TransformerModel& b, const std::string& what) {
  ASSERT_EQ(a.parameters().size(), b.parameters().size());
  for (size_t i = 0; i < a.parameters().size(); ++i) {
    ASSERT_EQ(a.parameters()[i].name, b.parameters()[i].name);
    EXPECT_EQ(to_vector<float>(a.parameters()[i].var->value), to_vector<float>(b.parameters()[i].var->value))
        << what << " " << a.parameters()[i].name;
  }
}

class HfCheckpointFamilies : public ::testing::TestWithParam<const char*> {};

TEST_P(HfCheckpointFamilies, SaveThenLoadGivesTheSameModelAndLogits) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const TransformerModel model = random_model(tiny_config(GetParam()), seed);
  save_hf_model(model, scratch.path());
  EXPECT_TRUE(std::filesystem::exists(scratch.file("config.json")));
  EXPECT_TRUE(std::filesystem::exists(scratch.file("generation_config.json")));
  EXPECT_EQ(read_hf_model_config(scratch.path()), model.config());
  const TransformerModel loaded = load_hf_model(scratch.path());
  EXPECT_EQ(loaded.config(), model.config());
  expect_same_parameters(model, loaded, std::string(GetParam()) + " seed " + std::to_string(seed));
  Tensor ids = Tensor::empty({2, 9}, DType::i32);
  fill_uniform(ids, seed, 0, 40, 77);
  const Tensor expected = model.logits(ids), actual = loaded.logits(ids);
  EXPECT_EQ(to_vector<float>(expected), to_vector<float>(actual)) << "seed " << seed;
}

INSTANTIATE_TEST_SUITE_P(Families, HfCheckpointFamilies,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "mixtral",
                                           "qwen2_moe", "qwen3_moe", "olmoe", "gpt_oss", "deepseek_v2", "deepseek_v3",
                                           "gemma4"));

// DeepSeek-V3's multi-token prediction modules travel as layers num_hidden_layers + k (above, the
// round trip keeps them); a checkpoint without them (transformers saves none) loads without them,
// and the copies of the shared embedding and head that DeepSeek's own checkpoints carry are skipped.
TEST(HfCheckpoint, MultiTokenPredictionWeightsAreKeptOrAbsentWithANote) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const TransformerModel model = random_model(tiny_config("deepseek_v3"), seed);
  save_hf_model(model, scratch.path());
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(scratch.path());
  for (const char* name :
       {"model.layers.3.eh_proj.weight", "model.layers.3.enorm.weight", "model.layers.3.shared_head.norm.weight",
        "model.layers.3.self_attn.kv_b_proj.weight", "model.layers.3.mlp.gate.e_score_correction_bias"})
    EXPECT_NO_THROW(checkpoint.info(name)) << name;
  // DeepSeek's own layout: the module also stores the shared embedding and head.
  ScratchDirectory with_copies;
  NamedTensorViews tensors;
  for (const std::string& name : checkpoint.names()) {
    Tensor value = Tensor::empty(checkpoint.info(name).shape, DType::f32);
    checkpoint.read_into(name, value);
    tensors.emplace_back(name, value.view());
    static std::vector<Tensor> keep;
    keep.push_back(value);
  }
  const Tensor& embedding = model.find_parameter("model.embed_tokens.weight")->var->value;
  tensors.emplace_back("model.layers.3.embed_tokens.weight", embedding.view());
  tensors.emplace_back("model.layers.3.shared_head.head.weight",
                       model.find_parameter("lm_head.weight")->var->value.view());
  write_safetensors_checkpoint(with_copies.path(), tensors, 0);
  std::filesystem::copy_file(scratch.file("config.json"), with_copies.file("config.json"));
  expect_same_parameters(model, load_hf_model(with_copies.path()), "with copies");

  // Without the module's tensors: config.json still says num_mtp_layers 1.
  ScratchDirectory without;
  ModelConfig plain = tiny_config("deepseek_v3");
  plain.mtp_layers = 0;
  save_hf_model(random_model(plain, seed), without.path());
  Json config = read_json_file(without.file("config.json"));
  config.set("num_mtp_layers", int64_t{1});
  write_file_atomically(without.file("config.json"), config.dump(2));
  EXPECT_EQ(read_hf_model_config(without.path()).mtp_layers, 0);
  EXPECT_EQ(load_hf_model(without.path()).config().mtp_layers, 0);
}

// Published MoE checkpoints hold one tensor per expert and projection: the export writes those
// names (Mixtral's block_sparse_moe.experts.<e>.w1/w3/w2), each the matching slice of lathe's
// stacked weight, and the import also takes the stacked in-memory names of transformers 5.x.
TEST(HfCheckpoint, ExpertsAreSavedPerExpertAndLoadFromEitherLayout) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const TransformerModel model = random_model(tiny_config("mixtral"), seed);
  save_hf_model(model, scratch.path());
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(scratch.path());
  for (const char* stacked : {"model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.gate.weight"})
    EXPECT_THROW(checkpoint.info(stacked), Error) << stacked;
  const int64_t ffn = 24, d = 16;
  const std::vector<float> gate_up =
      to_vector<float>(model.find_parameter("model.layers.2.mlp.experts.gate_up_proj")->var->value);
  const std::vector<float> down =
      to_vector<float>(model.find_parameter("model.layers.2.mlp.experts.down_proj")->var->value);
  auto saved = [&](const std::string& name) {
    Tensor value = Tensor::empty(checkpoint.info(name).shape, DType::f32);
    checkpoint.read_into(name, value);
    return to_vector<float>(value);
  };
  // Expert 1: w1 (gate) is rows [0, ffn) of its (2 ffn, d) block, w3 (up) rows [ffn, 2 ffn), w2 its (d, ffn) down.
  const auto gate_begin = gate_up.begin() + 1 * 2 * ffn * d;
  EXPECT_EQ(saved("model.layers.2.block_sparse_moe.experts.1.w1.weight"),
            std::vector<float>(gate_begin, gate_begin + ffn * d));
  EXPECT_EQ(saved("model.layers.2.block_sparse_moe.experts.1.w3.weight"),
            std::vector<float>(gate_begin + ffn * d, gate_begin + 2 * ffn * d));
  EXPECT_EQ(saved("model.layers.2.block_sparse_moe.experts.1.w2.weight"),
            std::vector<float>(down.begin() + d * ffn, down.begin() + 2 * d * ffn));
  EXPECT_EQ(saved("model.layers.2.block_sparse_moe.gate.weight"),
            to_vector<float>(model.find_parameter("model.layers.2.mlp.gate.weight")->var->value));

  // The stacked names (transformers 5.x in memory) load as well.
  ScratchDirectory stacked;
  NamedTensorViews tensors;
  for (const Parameter& parameter : model.parameters())
    tensors.emplace_back(parameter.name, parameter.var->value.view());
  write_safetensors_checkpoint(stacked.path(), tensors, 0);
  write_file_atomically(stacked.file("config.json"), read_file_contents(scratch.file("config.json")));
  expect_same_parameters(model, load_hf_model(stacked.path()), "stacked names");

  // A checkpoint missing one expert names the tensor.
  ScratchDirectory missing;
  NamedTensorViews partial;
  std::vector<Tensor> keep;
  for (const std::string& name : checkpoint.names()) {
    if (name == "model.layers.1.block_sparse_moe.experts.2.w3.weight") continue;
    keep.push_back(Tensor::empty(checkpoint.info(name).shape, DType::f32));
    checkpoint.read_into(name, keep.back());
    partial.emplace_back(name, keep.back().view());
  }
  write_safetensors_checkpoint(missing.path(), partial, 0);
  write_file_atomically(missing.file("config.json"), read_file_contents(scratch.file("config.json")));
  expect_error([&] { load_hf_model(missing.path()); },
               "missing tensor \"model.layers.1.block_sparse_moe.experts.2.w3.weight\"");
}

// GPT-OSS checkpoints hold each stacked expert weight under lathe's name in transformers' layout,
// (E, in, out) for x @ W: lathe's (E, out, in) transposed per expert. Biases and the router as they are.
TEST(HfCheckpoint, GptOssExpertsAreSavedTransposedPerExpert) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const TransformerModel model = random_model(tiny_config("gpt_oss"), seed);
  save_hf_model(model, scratch.path());
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(scratch.path());
  const int64_t experts = 3, ffn = 24, d = 16;
  auto saved = [&](const std::string& name) {
    Tensor value = Tensor::empty(checkpoint.info(name).shape, DType::f32);
    checkpoint.read_into(name, value);
    return value;
  };
  const Tensor gate_up = saved("model.layers.1.mlp.experts.gate_up_proj"),
               down = saved("model.layers.1.mlp.experts.down_proj");
  ASSERT_EQ(gate_up.shape(), (Shape{experts, d, 2 * ffn}));
  ASSERT_EQ(down.shape(), (Shape{experts, ffn, d}));
  const Tensor& ours_gate_up = model.find_parameter("model.layers.1.mlp.experts.gate_up_proj")->var->value;
  const Tensor& ours_down = model.find_parameter("model.layers.1.mlp.experts.down_proj")->var->value;
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = 0; j < 2 * ffn; ++j)
        ASSERT_EQ(gate_up.ptr<float>()[(e * d + i) * 2 * ffn + j],
                  ours_gate_up.ptr<float>()[(e * 2 * ffn + j) * d + i]);
      for (int64_t j = 0; j < ffn; ++j)
        ASSERT_EQ(down.ptr<float>()[(e * ffn + j) * d + i], ours_down.ptr<float>()[(e * d + i) * ffn + j]);
    }
  for (const char* name : {"model.layers.1.mlp.experts.gate_up_proj_bias", "model.layers.1.mlp.router.bias",
                           "model.layers.0.self_attn.sinks", "model.layers.0.self_attn.o_proj.bias"}) {
    const Tensor value = saved(name);
    EXPECT_EQ(to_vector<float>(value), to_vector<float>(model.find_parameter(name)->var->value)) << name;
  }
}

TEST(HfCheckpoint, Bf16AndShardedSaves) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const TransformerModel model = random_model(tiny_config("qwen2"), seed);
  HfSaveOptions options;
  options.dtype = DType::bf16;
  options.max_shard_bytes = 2000;
  save_hf_model(model, scratch.path(), options);
  EXPECT_TRUE(std::filesystem::exists(scratch.file("model.safetensors.index.json")));
  EXPECT_FALSE(std::filesystem::exists(scratch.file("model.safetensors")));
  const Json config = Json::parse(read_file_contents(scratch.file("config.json")));
  EXPECT_EQ(config.get("dtype").as_string(), "bfloat16");
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(scratch.path());
  EXPECT_GT(checkpoint.shard_paths().size(), 2u);
  EXPECT_EQ(checkpoint.info("model.embed_tokens.weight").dtype, DType::bf16);
  const TransformerModel loaded = load_hf_model(scratch.path());
  for (size_t i = 0; i < model.parameters().size(); ++i) {
    const Tensor bf16_value = convert(model.parameters()[i].var->value, DType::bf16);
    const Tensor rounded = convert(bf16_value, DType::f32);
    EXPECT_EQ(to_vector<float>(rounded), to_vector<float>(loaded.parameters()[i].var->value))
        << model.parameters()[i].name << " seed " << seed;
  }
}

TEST(HfCheckpoint, CopiesTokenizerFiles) {
  ScratchDirectory scratch;
  const TransformerModel model = random_model(tiny_config("llama"), 1);
  write_file_atomically(scratch.file("tok.json"), "{\"model\": {}}");
  HfSaveOptions options;
  options.tokenizer_json = scratch.file("tok.json");
  save_hf_model(model, scratch.file("out"), options);
  EXPECT_EQ(read_file_contents(scratch.file("out/tokenizer.json")), "{\"model\": {}}");
  EXPECT_FALSE(std::filesystem::exists(scratch.file("out/tokenizer_config.json")));
}

// Rewrites <dir>/model.safetensors with the tensors `edit` leaves.
void rewrite_weights(const std::string& dir,
                     const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& edit) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  {
    const SafetensorsFile file = SafetensorsFile::open(dir + "/model.safetensors");
    for (const std::string& name : file.names()) tensors.emplace_back(name, file.read(name));
  }
  edit(tensors);
  NamedTensorViews views;
  for (const auto& [name, tensor] : tensors) views.emplace_back(name, tensor.view());
  write_safetensors(dir + "/model.safetensors", views);
}

TEST(HfCheckpoint, BadCheckpointsNameTheTensor) {
  ScratchDirectory scratch;
  const std::string dir = scratch.path(), weights = scratch.file("model.safetensors");
  save_hf_model(random_model(tiny_config("llama"), 3), dir);
  rewrite_weights(dir, [](auto& tensors) {
    std::erase_if(tensors, [](const auto& named) { return named.first == "model.layers.1.mlp.up_proj.weight"; });
  });
  expect_error([&] { load_hf_model(dir); }, weights + ": missing tensor \"model.layers.1.mlp.up_proj.weight\"");

  save_hf_model(random_model(tiny_config("llama"), 3), dir);
  rewrite_weights(
      dir, [](auto& tensors) { tensors.emplace_back("model.layers.0.extra.weight", Tensor::zeros({2}, DType::f32)); });
  expect_error([&] { load_hf_model(dir); }, weights + ": unexpected tensor \"model.layers.0.extra.weight\"");

  save_hf_model(random_model(tiny_config("llama"), 3), dir);
  rewrite_weights(dir, [](auto& tensors) {
    for (auto& [name, tensor] : tensors)
      if (name == "model.norm.weight") tensor = Tensor::zeros({17}, DType::f32);
  });
  expect_error([&] { load_hf_model(dir); }, weights + ": tensor \"model.norm.weight\" has shape (17), expected (16)");

  save_hf_model(random_model(tiny_config("llama"), 3), dir);
  rewrite_weights(dir, [](auto& tensors) {
    for (auto& [name, tensor] : tensors)
      if (name == "model.norm.weight") tensor = Tensor::zeros({16}, DType::i32);
  });
  expect_error([&] { load_hf_model(dir); },
               weights + ": tensor \"model.norm.weight\" is i32, expected a floating dtype");

  std::filesystem::remove(scratch.file("config.json"));
  expect_error([&] { load_hf_model(dir); }, dir + ": no config.json");
  write_file_atomically(scratch.file("config.json"), "{\"model_type\": ");
  expect_error([&] { load_hf_model(dir); }, scratch.file("config.json"));
}

TEST(HfCheckpoint, TiedHeadSavedAnywayAndOldRotaryBuffersAreSkipped) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  const TransformerModel model = random_model(tiny_config("gemma2"), seed);
  save_hf_model(model, scratch.path());
  rewrite_weights(scratch.path(), [](auto& tensors) {
    Tensor embedding = tensors.front().second;
    for (const auto& [name, tensor] : tensors)
      if (name == "model.embed_tokens.weight") embedding = tensor;
    tensors.emplace_back("lm_head.weight", embedding);
    tensors.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros({2}, DType::f32));
  });
  expect_same_parameters(model, load_hf_model(scratch.path()), "seed " + std::to_string(seed));
}

// Gemma 3's and Gemma 4's ConditionalGeneration checkpoints: the text decoder under
// model.language_model.*, the other towers skipped (with one note line).
TEST(HfCheckpoint, LoadsGemmaMultimodalNamesAndSkipsTheOtherTowers) {
  const uint64_t seed = test_seed();
  for (const char* family : {"gemma3", "gemma4"}) {
    ScratchDirectory scratch;
    const TransformerModel model = random_model(tiny_config(family), seed);
    save_hf_model(model, scratch.path());
    Json text_config = Json::parse(read_file_contents(scratch.file("config.json")));
    const std::string gemma4 = std::string(family) == "gemma4" ? "true" : "";
    Json config = Json::object();
    Json architectures = Json::array();
    architectures.push(gemma4.empty() ? "Gemma3ForConditionalGeneration" : "Gemma4ForConditionalGeneration");
    config.set("architectures", std::move(architectures));
    config.set("model_type", gemma4.empty() ? "gemma3" : "gemma4");
    config.set("text_config", std::move(text_config));
    write_file_atomically(scratch.file("config.json"), config.dump());
    rewrite_weights(scratch.path(), [&](auto& tensors) {
      for (auto& [name, tensor] : tensors) name = "model.language_model." + name.substr(std::string("model.").size());
      tensors.emplace_back("model.vision_tower.patch_embedding.weight", Tensor::zeros({3}, DType::f32));
      if (!gemma4.empty()) {
        tensors.emplace_back("model.audio_tower.layers.0.weight", Tensor::zeros({3}, DType::f32));
        tensors.emplace_back("model.embed_vision.embedding_projection.weight", Tensor::zeros({3}, DType::f32));
      }
    });
    expect_same_parameters(model, load_hf_model(scratch.path()), str_cat(family, " seed ", seed));
  }
}

TEST(HfCheckpoint, LoadWeightsRequiresTheSameConfig) {
  ScratchDirectory scratch;
  save_hf_model(random_model(tiny_config("llama"), 5), scratch.path());
  ModelConfig other = tiny_config("llama");
  other.ffn_dim = 32;
  TransformerModel model(other);
  expect_error([&] { load_hf_weights(model, scratch.path()); }, "differs from config.json in model.ffn_dim (32 vs 24)");
}

}  // namespace
}  // namespace lathe
