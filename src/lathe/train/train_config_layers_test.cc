// Layered configs: several files (later ones win, key by key), base_config chains relative to the
// including file, cycles refused with one error naming the files, errors located in the file
// that holds the mistake, and the YAML features a config may use (anchors, merge keys, block
// scalars) reaching the typed config.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "expect_error.h"
#include "lathe/core/error.h"
#include "lathe/train/train_config.h"
#include "scratch_directory.h"

namespace lathe {
namespace {

std::string write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

TEST(TrainConfigLayers, LaterFilesSetKeysOverEarlierOnesThenOverrides) {
  ScratchDirectory scratch;
  const std::string a = write(scratch.file("a.yaml"), "model:\n  n_layers: 8\n  d_model: 128\ntrain: {steps: 10}\n");
  const std::string b = write(scratch.file("b.yaml"), "model:\n  n_layers: 4\noptimizer: {lr: 0.01}\n");
  TrainConfig config = parse_train_config({a, b}, {"train.steps=7"});
  EXPECT_EQ(config.model.n_layers, 4);                          // b wins
  EXPECT_EQ(config.model.d_model, 128);                         // a's, untouched by b's model section
  EXPECT_EQ(config.optimizer.lr, 0.01);                         // b's
  EXPECT_EQ(config.train.steps, 7);                             // the override, last
  EXPECT_EQ(parse_train_config({b, a}, {}).model.n_layers, 8);  // the order decides
}

TEST(TrainConfigLayers, BaseConfigChainsResolveRelativeToTheIncludingFile) {
  ScratchDirectory scratch;
  write(scratch.file("presets/root.yaml"), "model: {n_layers: 2, d_model: 96}\ntrain: {steps: 3}\nrun_dir: root\n");
  write(scratch.file("presets/sub/middle.yaml"), "base_config: ../root.yaml\nmodel: {d_model: 64}\n");
  const std::string top = write(scratch.file("top.yaml"), "base_config: presets/sub/middle.yaml\ntrain: {steps: 9}\n");
  TrainConfig config = parse_train_config({top}, {});
  EXPECT_EQ(config.model.n_layers, 2);  // from root
  EXPECT_EQ(config.model.d_model, 64);  // middle over root
  EXPECT_EQ(config.train.steps, 9);     // top over both
  EXPECT_EQ(config.run_dir, "root");
  // The same chain through an absolute base path.
  const std::string absolute =
      write(scratch.file("absolute.yaml"), "base_config: " + scratch.file("presets/root.yaml") + "\n");
  EXPECT_EQ(parse_train_config({absolute}, {}).model.d_model, 96);
}

TEST(TrainConfigLayers, CyclesAreOneErrorNamingTheFiles) {
  ScratchDirectory scratch;
  const std::string a = write(scratch.file("a.yaml"), "base_config: b.yaml\n");
  const std::string b = write(scratch.file("b.yaml"), "base_config: a.yaml\n");
  EXPECT_EQ(error_message_of([&] { parse_train_config({a}, {}); }),
            "base_config cycle: " + a + " -> " + b + " -> " + scratch.file("a.yaml"));
  const std::string self = write(scratch.file("self.yaml"), "base_config: ./self.yaml\n");
  EXPECT_EQ(error_message_of([&] { parse_train_config({self}, {}); }),
            "base_config cycle: " + self + " -> " + scratch.file("./self.yaml"));
}

TEST(TrainConfigLayers, ErrorsNameTheFileHoldingTheMistake) {
  ScratchDirectory scratch;
  const std::string base = write(scratch.file("base.yaml"), "model:\n  d_modle: 3\n");
  const std::string top = write(scratch.file("top.yaml"), "base_config: base.yaml\ntrain:\n  steps: many\n");
  EXPECT_EQ(error_message_of([&] { parse_train_config({top}, {}); }),
            base + ":2:3: unknown key 'model.d_modle' (did you mean 'model.d_model'?)\n" + top +
                ":3:3: train.steps: expected an integer, got 'many'");
  const std::string missing = write(scratch.file("missing.yaml"), "\nbase_config: nowhere.yaml\n");
  EXPECT_EQ(error_message_of([&] { parse_train_config({missing}, {}); }),
            missing + ":2:1: base_config: 'nowhere.yaml' not found (" + scratch.file("nowhere.yaml") +
                "; relative to the file that names it)");
  const std::string wrong_type = write(scratch.file("list.yaml"), "base_config: [a.yaml]\n");
  EXPECT_EQ(error_message_of([&] { parse_train_config({wrong_type}, {}); }),
            wrong_type + ":1:1: base_config: expected the path of another config file, got a list");
  const std::string bad_base = write(scratch.file("bad_base.yaml"), "model: {d_model: [1\n");
  const std::string uses_bad = write(scratch.file("uses_bad.yaml"), "base_config: bad_base.yaml\n");
  EXPECT_EQ(error_message_of([&] { parse_train_config({uses_bad}, {}); }),
            bad_base + ":1:18: unterminated '[' (no matching ']')");
  EXPECT_EQ(error_message_of([] { train_config_from_yaml("base_config: x.yaml\n", "text"); }),
            "text:1:1: base_config: only a config file (not text without a file) can name a base_config");
  EXPECT_EQ(error_message_of([] { parse_train_config({}, {"base_config=x.yaml"}); }),
            "unknown key 'base_config' (`lathe config --keys` lists them)");
}

TEST(TrainConfigLayers, AnchorsMergeKeysAndBlockScalarsReachTheConfig) {
  TrainConfig config = train_config_from_yaml(
      "x-shared: &shared\n"
      "  n_heads: 4\n"
      "  n_kv_heads: 4\n"
      "model:\n"
      "  <<: *shared\n"
      "  d_model: 128\n"
      "run_dir: &dir runs/x\n"
      "data:\n"
      "  tokenizer: >-\n"
      "    /tmp/a\n"
      "    b.json\n",
      "test.yaml");
  EXPECT_EQ(config.model.n_heads, 4);
  EXPECT_EQ(config.model.n_kv_heads, 4);
  EXPECT_EQ(config.model.d_model, 128);
  EXPECT_EQ(config.data.tokenizer, "/tmp/a b.json");
  // An "x-" key holds anchors and is otherwise ignored; "base" is no config key; a merged key with a
  // wrong value is located where it was written.
  EXPECT_EQ(error_message_of(
                [] { train_config_from_yaml("base: &base {n_layers: two}\nmodel:\n  <<: *base\n", "test.yaml"); }),
            "test.yaml:1:1: unknown key 'base' (`lathe config --keys` lists them)\n"
            "test.yaml:1:14: model.n_layers: expected an integer, got 'two'");
}

}  // namespace
}  // namespace lathe
