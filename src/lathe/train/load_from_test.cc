// load_from=hf:DIR: the model section and tokenizer come from the HF directory, contradicting
// model.* overrides are refused, and the weights load into the run's model.
#include "lathe/train/load_from.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "expect_error.h"
#include "lathe/core/rng.h"
#include "lathe/io/durable_file.h"
#include "lathe/models/hf/hf_checkpoint.h"
#include "scratch_directory.h"
#include "test_seed.h"

namespace lathe {
namespace {

ModelConfig pretrained_config() {
  ModelConfig config;
  config.family = "qwen3";
  config.qk_norm = true;
  config.vocab_size = 300;
  config.d_model = 32;
  config.n_layers = 3;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.head_dim = 8;
  config.ffn_dim = 40;
  config.max_seq_len = 128;
  config.norm_eps = 1e-6;
  config.rope_theta = 1e6;
  config.tie_embeddings = true;
  return config;
}

TEST(LoadFrom, ModelSectionAndTokenizerComeFromTheDirectory) {
  const uint64_t seed = test_seed();
  ScratchDirectory scratch;
  TransformerModel pretrained(pretrained_config());
  pretrained.initialize(seed);
  save_hf_model(pretrained, scratch.path());
  const std::string load_from = "load_from=hf:" + scratch.path();

  TrainConfig config = parse_train_config({}, {load_from});
  EXPECT_EQ(config.model, pretrained.config());
  EXPECT_EQ(config.data.tokenizer, "");  // the directory has no tokenizer.json yet
  write_file_atomically(scratch.file("tokenizer.json"), "{}");
  config = parse_train_config({}, {load_from, "model.n_layers=3", "train.steps=7"});
  EXPECT_EQ(config.model, pretrained.config());
  EXPECT_EQ(config.train.steps, 7);
  EXPECT_EQ(config.data.tokenizer, scratch.file("tokenizer.json"));
  EXPECT_EQ(parse_train_config({}, {load_from, "data.tokenizer=mine.json"}).data.tokenizer, "mine.json");

  TransformerModel model(config.model);
  model.initialize(seed + 1);
  std::FILE* log = std::tmpfile();
  load_pretrained_weights(config, model, log);
  std::fclose(log);
  for (size_t i = 0; i < model.parameters().size(); ++i)
    EXPECT_EQ(to_vector<float>(model.parameters()[i].var->value),
              to_vector<float>(pretrained.parameters()[i].var->value))
        << model.parameters()[i].name << " seed " << seed;
}

TEST(LoadFrom, ContradictionsAndBadValuesAreErrors) {
  ScratchDirectory scratch;
  TransformerModel pretrained(pretrained_config());
  save_hf_model(pretrained, scratch.path());
  const std::string load_from = "load_from=hf:" + scratch.path();
  expect_error(
      [&] {
        parse_train_config({}, {load_from, "model.n_layers=5"});
      },
      "model.n_layers=5 contradicts " + scratch.path() + "/config.json, which gives 3");
  expect_error([&] { parse_train_config({}, {"load_from=" + scratch.path()}); }, "is not supported (expected hf:DIR");
  expect_error([&] { parse_train_config({}, {"load_from=hf:" + scratch.file("nothing")}); },
               "is neither a directory nor a Hugging Face model name");
  std::filesystem::create_directories(scratch.file("empty"));
  expect_error([&] { parse_train_config({}, {"load_from=hf:" + scratch.file("empty")}); }, "no config.json");
}

// A value the user gives is checked even when it equals lathe's own default: model.n_layers=4 (the
// default) on the 3-layer checkpoint was once dropped silently and trained 3 layers.
TEST(LoadFrom, AGivenValueEqualToLathesDefaultIsStillChecked) {
  ScratchDirectory scratch;
  TransformerModel pretrained(pretrained_config());
  save_hf_model(pretrained, scratch.file("hf"));
  const std::string load_from = "load_from=hf:" + scratch.file("hf");
  const int64_t lathe_default = ModelConfig{}.n_layers;
  ASSERT_NE(lathe_default, pretrained_config().n_layers);
  const std::string given = "model.n_layers=" + std::to_string(lathe_default);
  expect_error(
      [&] {
        parse_train_config({}, {load_from, given});
      },
      given + " contradicts " + scratch.file("hf") + "/config.json, which gives 3");
  write_file_atomically(scratch.file("run.yaml"), "load_from: hf:" + scratch.file("hf") +
                                                      "\nmodel:\n  n_layers: " + std::to_string(lathe_default) + "\n");
  expect_error([&] { parse_train_config({scratch.file("run.yaml")}, {}); }, given + " contradicts");
  // Keys left alone still take the checkpoint's values.
  EXPECT_EQ(parse_train_config({}, {load_from, "model.n_layers=3"}).model, pretrained.config());
}

}  // namespace
}  // namespace lathe
