// TrainConfig loading: the schema (types, unknown keys, overrides), validation, the resolved YAML
// round trip, and the presets in configs/.
#include "lathe/train/train_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "lathe/core/error.h"
#include "lathe/device/cuda_runtime.h"

namespace lathe {
namespace {

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TrainConfig from_yaml(const std::string& text) { return train_config_from_yaml(text, "test.yaml"); }

// A config whose data.path exists on any machine, so validation tests see only their own problem.
TrainConfig valid_config() {
  TrainConfig config;
  config.data.path = LATHE_SOURCE_DIR "/README.md";
  return config;
}

std::vector<std::string> problems_with(const std::function<void(TrainConfig&)>& change) {
  TrainConfig config = valid_config();
  change(config);
  return find_train_config_problems(config);
}

TEST(TrainConfig, YamlSectionsSetTypedMembers) {
  TrainConfig config = from_yaml(
      "model:\n"
      "  d_model: 512\n"
      "  ffn_activation: gelu_tanh\n"
      "  norm_weight_offset: 1\n"
      "  rope_theta: 5e5\n"
      "train: {remat: recompute_layer, dtype: bf16, seed: 7}\n"
      "optimizer:\n"
      "  lr: 3   # float fields accept integers\n"
      "  schedule: wsd\n"
      "data:\n"
      "  tokenizer:   # empty means: train one\n"
      "log.every: 5  # dotted keys work at the top level too\n"
      "run_dir: /tmp/r\n");
  TrainConfig expected;
  expected.model.d_model = 512;
  expected.model.ffn_activation = FfnActivation::gelu_tanh;
  expected.model.norm_weight_offset = 1.0f;
  expected.model.rope_theta = 500000.0;
  expected.train.remat = RematPolicy::recompute_layer;
  expected.train.dtype = ComputeDtype::bf16;
  expected.train.seed = 7;
  expected.optimizer.lr = 3.0;
  expected.optimizer.schedule = LrSchedule::wsd;
  expected.data.tokenizer = "";
  expected.log.every = 5;
  expected.run_dir = "/tmp/r";
  EXPECT_EQ(config, expected);
}

TEST(TrainConfig, EmptyDocumentAndEmptySectionsKeepDefaults) {
  EXPECT_EQ(from_yaml(""), TrainConfig{});
  EXPECT_EQ(from_yaml("model:\n  # d_model: 3\ntrain:\n"), TrainConfig{});
}

TEST(TrainConfig, UnknownKeysSuggestTheClosestName) {
  EXPECT_EQ(error_of([] { from_yaml("model:\n  d_modle: 3\n"); }),
            "test.yaml:2:3: unknown key 'model.d_modle' (did you mean 'model.d_model'?)");
  EXPECT_EQ(error_of([] { from_yaml("optimizer:\n  seq_len: 3\n"); }),
            "test.yaml:2:3: unknown key 'optimizer.seq_len' (did you mean 'train.seq_len'?)");
  EXPECT_EQ(error_of([] { from_yaml("d_model: 3\n"); }),
            "test.yaml:1:1: unknown key 'd_model' (did you mean 'model.d_model'?)");
  EXPECT_EQ(error_of([] { from_yaml("modle:\n  d_model: 3\n"); }),
            "test.yaml:1:1: unknown key 'modle' (did you mean 'model'?)");
  EXPECT_EQ(error_of([] { from_yaml("frobnicate: 1\n"); }),
            "test.yaml:1:1: unknown key 'frobnicate' (`lathe config --keys` lists them)");
}

TEST(TrainConfig, WrongTypesNameKeyExpectationAndValue) {
  EXPECT_EQ(error_of([] { from_yaml("model:\n  n_layers: two\n"); }),
            "test.yaml:2:3: model.n_layers: expected an integer, got 'two'");
  EXPECT_EQ(error_of([] { from_yaml("model: {n_layers: 2.5}\n"); }),
            "test.yaml:1:9: model.n_layers: expected an integer, got '2.5'");
  EXPECT_EQ(error_of([] { from_yaml("train: {seed: -1}\n"); }),
            "test.yaml:1:9: train.seed: expected a non-negative integer, got '-1'");
  EXPECT_EQ(error_of([] { from_yaml("optimizer: {lr: fast}\n"); }),
            "test.yaml:1:13: optimizer.lr: expected a number, got 'fast'");
  EXPECT_EQ(error_of([] { from_yaml("optimizer: {lr: .inf}\n"); }),
            "test.yaml:1:13: optimizer.lr: expected a finite number, got '.inf'");
  EXPECT_EQ(error_of([] { from_yaml("checkpoint: {async: yes}\n"); }),
            "test.yaml:1:14: checkpoint.async: expected true or false, got 'yes'");
  EXPECT_EQ(error_of([] { from_yaml("model: {family: lama}\n"); }),
            "test.yaml:1:9: model.family: expected one of llama, mistral, qwen2, qwen3, gemma2, gemma3, mixtral, "
            "qwen2_moe, qwen3_moe, olmoe, gpt_oss, deepseek_v2, deepseek_v3, gemma4, qwen3_next, qwen3_5_text, mamba2, "
            "got 'lama'");
  EXPECT_EQ(error_of([] { from_yaml("train: {remat: all}\n"); }),
            "test.yaml:1:9: train.remat: expected one of save_all, recompute_layer, save_matmuls, got 'all'");
  EXPECT_EQ(error_of([] { from_yaml("run_dir: 2024\n"); }),
            "test.yaml:1:1: run_dir: expected a string, got '2024' (quote it to make it a string)");
  EXPECT_EQ(error_of([] { from_yaml("model: 3\n"); }),
            "test.yaml:1:1: model: expected a mapping of model.* keys, got '3'");
  EXPECT_EQ(error_of([] { from_yaml("- a\n"); }),
            "test.yaml: expected a mapping of config keys at the top level, got a list");
}

TEST(TrainConfig, EveryLoadingErrorIsReportedOnItsOwnLine) {
  EXPECT_EQ(error_of([] { from_yaml("model:\n  n_layers: two\n  d_modle: 3\ntrain: {remat: x}\n"); }),
            "test.yaml:2:3: model.n_layers: expected an integer, got 'two'\n"
            "test.yaml:3:3: unknown key 'model.d_modle' (did you mean 'model.d_model'?)\n"
            "test.yaml:4:9: train.remat: expected one of save_all, recompute_layer, save_matmuls, got 'x'");
}

TEST(TrainConfig, OverridesParseValuesAsYaml) {
  TrainConfig config;
  apply_train_config_override(config, "model.n_layers=2");
  apply_train_config_override(config, "optimizer.lr=1e-3");
  apply_train_config_override(config, "run_dir=/tmp/x y");
  apply_train_config_override(config, "data.cache_dir=''");
  apply_train_config_override(config, "model={d_model: 64, qk_norm: true}");
  EXPECT_EQ(config.model.n_layers, 2);
  EXPECT_EQ(config.optimizer.lr, 1e-3);
  EXPECT_EQ(config.run_dir, "/tmp/x y");
  EXPECT_EQ(config.data.cache_dir, "");
  EXPECT_EQ(config.model.d_model, 64);
  EXPECT_TRUE(config.model.qk_norm);
  EXPECT_EQ(error_of([&] { apply_train_config_override(config, "model.n_layers"); }),
            "override 'model.n_layers': expected key=value (e.g. optimizer.lr=1e-3)");
  EXPECT_EQ(error_of([&] { apply_train_config_override(config, "model.n_layers="); }),
            "override 'model.n_layers=': missing value after '=' (write model.n_layers='' for an empty string)");
  EXPECT_EQ(error_of([&] { apply_train_config_override(config, "=3"); }), "override '=3': missing key before '='");
  EXPECT_EQ(error_of([&] { apply_train_config_override(config, "model.n_layers=two"); }),
            "model.n_layers: expected an integer, got 'two'");
  EXPECT_EQ(error_of([&] { apply_train_config_override(config, "model.d_modle=3"); }),
            "unknown key 'model.d_modle' (did you mean 'model.d_model'?)");
}

TEST(TrainConfig, OverridesApplyAfterTheFileInOrder) {
  auto path = std::filesystem::temp_directory_path() / ("lathe_config_test_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "model:\n  n_layers: 8\n  d_model: 128\n";
  TrainConfig config = parse_train_config({path.string()}, {"model.n_layers=3", "model.n_layers=5"});
  EXPECT_EQ(config.model.n_layers, 5);
  EXPECT_EQ(config.model.d_model, 128);
  std::filesystem::remove(path);
  EXPECT_EQ(error_of([&] { parse_train_config({path.string()}, {}); }),
            "cannot read config file '" + path.string() + "' (no such file or not readable)");
}

TEST(TrainConfig, ResolvedYamlAndJsonHoldEveryValue) {
  TrainConfig config = valid_config();
  config.model.norm_eps = 1e-6;
  config.model.attention_scale = 0.0625f;
  config.model.embedding_scale = 0.1f;  // not exact in binary: must still come back bitwise
  config.optimizer.lr = 1.0 / 3.0;
  config.train.seed = 9007199254740992ull;
  config.run_dir = "runs/a: b # c";
  config.data.cache_dir = "with \"quotes\" and \\";
  config.train.remat = RematPolicy::save_matmuls;
  std::string yaml = train_config_to_yaml(config);
  EXPECT_EQ(train_config_from_yaml(yaml, "resolved"), config) << yaml;
  EXPECT_NE(yaml.find("  norm_eps: 1.0e-6"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("# optimizer: "), std::string::npos) << yaml;
  Json json = train_config_to_json(config);
  EXPECT_EQ(json.get("model").get("norm_eps").as_number(), 1e-6);
  EXPECT_EQ(json.get("train").get("remat").as_string(), "save_matmuls");
  EXPECT_EQ(json.get("run_dir").as_string(), "runs/a: b # c");
  EXPECT_EQ(json.get("optimizer").size(), 12u);
}

TEST(TrainConfigValidation, DefaultsAreValid) {
  EXPECT_EQ(find_train_config_problems(valid_config()), std::vector<std::string>{});
}

// Each change breaks exactly one rule and must give exactly that line.
TEST(TrainConfigValidation, EachRuleGivesOneClearLine) {
  struct Case {
    std::function<void(TrainConfig&)> change;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {[](TrainConfig& c) { c.model.vocab_size = 256; },
       "model.vocab_size=256 is too small: at least 257 (256 byte tokens + EOS)"},
      {[](TrainConfig& c) { c.model.d_model = 0; }, "model.d_model=0 must be > 0"},
      {[](TrainConfig& c) {
         c.model.family = "gpt_oss";
         c.model.attention_bias = true;
         c.model.sliding_window = 128;
         c.model.sliding_window_pattern = 2;
         c.model.moe_experts = 4;
         c.dist.expert_parallel = true;
       },
       "dist.expert_parallel=true is not supported by model.family=gpt_oss yet (its layer does not route through the "
       "expert exchange)"},
      {[](TrainConfig& c) {
         c.model.moe_experts = 4;
         c.model.moe_top_k = 5;
       },
       "model.moe_top_k=5 must be in [1, model.moe_experts=4]"},
      {[](TrainConfig& c) {
         c.model.moe_experts = 4;
         c.model.moe_shared_gate = true;
       },
       "model.moe_shared_gate=true needs a shared expert (model.moe_shared_ffn_dim > 0)"},
      {[](TrainConfig& c) {
         c.model.moe_experts = 4;
         c.model.moe_dense_layers = "1,9";
       },
       "model.moe_dense_layers lists layer 9, but the model has 4 layers"},
      {[](TrainConfig& c) {
         c.model.moe_experts = 4;
         c.model.moe_dense_layers = "1;2";
       },
       "model.moe_dense_layers: '1;2' is not a comma-separated list of layer indices (e.g. \"0,3\")"},
      {[](TrainConfig& c) {
         c.model.moe_experts = 4;
         c.model.moe_layer_step = 0;
       },
       "model.moe_layer_step=0 must be > 0"},
      {[](TrainConfig& c) { c.model.n_layers = -1; }, "model.n_layers=-1 must be > 0"},
      {[](TrainConfig& c) { c.model.ffn_dim = 0; }, "model.ffn_dim=0 must be > 0"},
      {[](TrainConfig& c) { c.model.head_dim = -4; }, "model.head_dim=-4 must be >= 0"},
      {[](TrainConfig& c) {
         c.model.n_heads = 3;
         c.model.n_kv_heads = 3;
       },
       "model.n_heads=3 does not divide model.d_model=256 (or set model.head_dim)"},
      {[](TrainConfig& c) { c.model.n_kv_heads = 3; }, "model.n_kv_heads=3 does not divide model.n_heads=4"},
      {[](TrainConfig& c) { c.model.partial_rotary_factor = 1.5; },
       "model.partial_rotary_factor=1.5 must be in (0, 1]"},
      {[](TrainConfig& c) { c.model.partial_rotary_factor = 0.01; },
       "rotary dim 0 (head_dim 64 * model.partial_rotary_factor 0.01) must be even, at least 2 and at most head_dim"},
      {[](TrainConfig& c) { c.model.rope_theta = 0; }, "model.rope_theta=0 must be > 0"},
      {[](TrainConfig& c) { c.model.rope_local_theta = 10000; },
       "model.rope_local_theta=10000 has no effect without model.sliding_window > 0"},
      {[](TrainConfig& c) {
         c.model.rope_scaling = "llama3";
         c.model.rope_scaling_factor = 0.5;
       },
       "model.rope_scaling_factor=0.5 must be >= 1 (it extends the context)"},
      {[](TrainConfig& c) {
         c.model.rope_scaling = "llama3";
         c.model.rope_high_freq_factor = 1;
       },
       "model.rope_high_freq_factor=1 must be > model.rope_low_freq_factor=1"},
      {[](TrainConfig& c) {
         c.model.rope_scaling = "llama3";
         c.model.rope_original_max_position = 0;
       },
       "model.rope_original_max_position=0 must be > 0"},
      {[](TrainConfig& c) { c.model.norm_eps = 0; }, "model.norm_eps=0 must be > 0"},
      {[](TrainConfig& c) { c.model.embedding_scale = -1; }, "model.embedding_scale=-1 must be >= 0"},
      {[](TrainConfig& c) { c.model.final_logit_softcap = -30; }, "model.final_logit_softcap=-30 must be >= 0"},
      {[](TrainConfig& c) { c.model.attn_logit_softcap = -50; }, "model.attn_logit_softcap=-50 must be >= 0"},
      {[](TrainConfig& c) { c.model.attention_scale = -1; }, "model.attention_scale=-1 must be >= 0"},
      {[](TrainConfig& c) { c.model.sliding_window = -1; }, "model.sliding_window=-1 must be >= 0"},
      {[](TrainConfig& c) { c.model.sliding_window_pattern = 6; },
       "model.sliding_window_pattern=6 has no effect without model.sliding_window > 0"},
      {[](TrainConfig& c) { c.model.init_std = 0; }, "model.init_std=0 must be > 0"},
      {[](TrainConfig& c) {
         c.train.steps = 0;
         c.optimizer.warmup_steps = 0;
       },
       "train.steps=0 must be > 0"},
      {[](TrainConfig& c) { c.train.batch_size = 0; }, "train.batch_size=0 must be > 0"},
      {[](TrainConfig& c) { c.train.grad_accum = 0; }, "train.grad_accum=0 must be > 0"},
      {[](TrainConfig& c) { c.train.threads = -2; }, "train.threads=-2 must be >= 0"},
      {[](TrainConfig& c) { c.dist.expert_parallel = true; },
       "dist.expert_parallel=true needs a mixture-of-experts model (model.moe_experts is 0)"},
      {[](TrainConfig& c) { c.train.seq_len = 512; }, "train.seq_len=512 does not fit model.max_seq_len=256"},
      {[](TrainConfig& c) { c.model.sandwich_norms = true; },
       "model.sandwich_norms=true does not match model.family=llama (sandwich norms are the gemma2/gemma3/gemma4 "
       "block's wiring)"},
      {[](TrainConfig& c) { c.optimizer.lr = 0; }, "optimizer.lr=0 must be > 0"},
      {[](TrainConfig& c) { c.optimizer.min_lr_ratio = 2; }, "optimizer.min_lr_ratio=2 must be in [0, 1]"},
      {[](TrainConfig& c) { c.optimizer.beta1 = 1; }, "optimizer.beta1=1 must be in [0, 1)"},
      {[](TrainConfig& c) { c.optimizer.beta2 = -0.1; }, "optimizer.beta2=-0.1 must be in [0, 1)"},
      {[](TrainConfig& c) { c.optimizer.eps = 0; }, "optimizer.eps=0 must be > 0"},
      {[](TrainConfig& c) { c.optimizer.weight_decay = -0.1; }, "optimizer.weight_decay=-0.1 must be >= 0"},
      {[](TrainConfig& c) { c.optimizer.grad_clip = -1; }, "optimizer.grad_clip=-1 must be >= 0"},
      {[](TrainConfig& c) { c.optimizer.warmup_steps = 2000; }, "optimizer.warmup_steps=2000 exceeds train.steps=250"},
      {[](TrainConfig& c) { c.optimizer.decay_steps_fraction = 1.5; },
       "optimizer.decay_steps_fraction=1.5 must be in [0, 1]"},
      {[](TrainConfig& c) {
         c.optimizer.schedule = LrSchedule::wsd;
         c.optimizer.warmup_steps = 220;
       },
       "optimizer.warmup_steps=220 plus the wsd decay (0.2 * train.steps=50) exceeds train.steps=250"},
      {[](TrainConfig& c) {
         c.optimizer.schedule = LrSchedule::wsd;
         c.optimizer.decay_steps_fraction = 0;
       },
       "optimizer.decay_steps_fraction=0 leaves the wsd schedule no decay phase"},
      {[](TrainConfig& c) { c.data.path = ""; }, "data.path is empty: expected a text file or a folder of text files"},
      {[](TrainConfig& c) { c.data.path = "/no/such/corpus"; },
       "data.path '/no/such/corpus' does not exist (expected a text file or a folder of text files)"},
      {[](TrainConfig& c) { c.data.tokenizer = "/no/such/tokenizer.json"; },
       "data.tokenizer '/no/such/tokenizer.json' is not a file (expected a tokenizer.json; empty: train one)"},
      {[](TrainConfig& c) { c.data.val_fraction = 0; }, "data.val_fraction=0 must be in (0, 1)"},
      {[](TrainConfig& c) { c.checkpoint.every = -1; }, "checkpoint.every=-1 must be >= 0"},
      {[](TrainConfig& c) { c.checkpoint.keep_last = 0; }, "checkpoint.keep_last=0 must be >= 1"},
      {[](TrainConfig& c) { c.log.every = 0; }, "log.every=0 must be >= 1"},
      {[](TrainConfig& c) { c.log.eval_every = -1; }, "log.eval_every=-1 must be >= 0"},
      {[](TrainConfig& c) { c.log.eval_batches = 0; }, "log.eval_batches=0 must be >= 1"},
      {[](TrainConfig& c) { c.run_dir = ""; }, "run_dir is empty: expected a directory for checkpoints and metrics"},
  };
  for (const auto& test_case : cases)
    EXPECT_EQ(problems_with(test_case.change), std::vector<std::string>{test_case.problem});
}

TEST(TrainConfigValidation, GpuTrainingNeedsADevice) {
  if (cuda::available()) GTEST_SKIP() << "a usable CUDA device is present: " << cuda::status_line();
  EXPECT_EQ(problems_with([](TrainConfig& c) { c.train.device = "cuda"; }),
            std::vector<std::string>{"train.device=cuda: no usable CUDA device here (" + cuda::status_line() + ")"});
}

// With a device (simulated here), what the GPU step does not run yet is one line each.
TEST(TrainConfigValidation, GpuTrainingRefusesWhatItDoesNotRunYet) {
  cuda::HostSimulation device;
  EXPECT_EQ(problems_with([](TrainConfig& c) { c.train.device = "cuda"; }), std::vector<std::string>{});
  EXPECT_EQ(problems_with([](TrainConfig& c) {
              c.train.device = "cuda";
              c.model.family = "mixtral";
              c.model.moe_experts = 4;
            }),
            std::vector<std::string>{});
  EXPECT_EQ(problems_with([](TrainConfig& c) {
              c.train.device = "cuda";
              c.model.family = "qwen2_moe";
              c.model.moe_experts = 4;
              c.model.moe_shared_ffn_dim = 64;
              c.model.moe_shared_gate = true;
            }),
            std::vector<std::string>{});
  EXPECT_EQ(problems_with([](TrainConfig& c) {  // expert parallelism on GPUs: the exchange staged through the host
              c.train.device = "cuda";
              c.dist.expert_parallel = true;
              c.model.moe_experts = 4;
            }),
            std::vector<std::string>{});
  EXPECT_EQ(problems_with([](TrainConfig& c) {
              c.train.device = "cuda";
              c.model.family = "mamba2";
            }),
            std::vector<std::string>{});
  EXPECT_EQ(problems_with([](TrainConfig& c) {
              c.train.device = "cuda";
              c.model.family = "qwen3_next";
            }),
            std::vector<std::string>{});
  EXPECT_EQ(problems_with([](TrainConfig& c) {
              c.train.device = "cuda";
              c.model.family = "gemma4";
              c.model.sandwich_norms = true;
              c.model.moe_experts = 4;
            }),
            std::vector<std::string>{});
  EXPECT_EQ(problems_with([](TrainConfig& c) {
              c.train.device = "cuda";
              c.model.family = "qwen3";
              c.model.qk_norm = true;
            }),
            std::vector<std::string>{});
}

TEST(TrainConfigValidation, AllProblemsAreReportedTogether) {
  TrainConfig config = valid_config();
  config.train.seq_len = 512;
  config.optimizer.beta2 = 1.0;
  config.log.every = 0;
  EXPECT_EQ(error_of([&] { validate_train_config(config); }),
            "train.seq_len=512 does not fit model.max_seq_len=256\n"
            "optimizer.beta2=1 must be in [0, 1)\n"
            "log.every=0 must be >= 1");
  config.data.path = "/no/such/corpus";
  EXPECT_EQ(find_train_config_problems(config, /*check_files=*/false).size(), 3u);
}

TEST(TrainConfigValidation, LoadValidatesAfterOverrides) {
  EXPECT_EQ(error_of([] {
              load_train_config({}, {"data.path=" LATHE_SOURCE_DIR, "train.seq_len=512"});
            }),
            "train.seq_len=512 does not fit model.max_seq_len=256");
  TrainConfig config =
      load_train_config({}, {"data.path=" LATHE_SOURCE_DIR, "train.seq_len=512", "model.max_seq_len=512"});
  EXPECT_EQ(config.train.seq_len, 512);
}

std::string preset_path(const std::string& name) { return LATHE_SOURCE_DIR "/configs/" + name + ".yaml"; }

TEST(TrainConfigPresets, DefaultYamlIsExactlyTheBuiltInDefaults) {
  EXPECT_EQ(parse_train_config({preset_path("default")}, {}), TrainConfig{});
}

TEST(TrainConfigPresets, EveryPresetLoadsValidatesAndRoundTrips) {
  int presets = 0;
  for (const auto& entry : std::filesystem::directory_iterator(LATHE_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    ++presets;
    SCOPED_TRACE(entry.path().string());
    TrainConfig config = parse_train_config({entry.path().string()}, {});
    // data.path is a machine's file; everything else must be consistent as shipped.
    EXPECT_EQ(find_train_config_problems(config, /*check_files=*/false), std::vector<std::string>{});
    EXPECT_EQ(train_config_from_yaml(train_config_to_yaml(config), "resolved"), config);
  }
  EXPECT_GE(presets, 5);
}

// Expected shapes are the published config.json values (see each preset's header).
TEST(TrainConfigPresets, Llama32OneBillionHasThePublishedShape) {
  ModelConfig model = parse_train_config({preset_path("llama3.2-1b")}, {}).model;
  EXPECT_EQ(model.vocab_size, 128256);
  EXPECT_EQ(model.d_model, 2048);
  EXPECT_EQ(model.n_layers, 16);
  EXPECT_EQ(model.n_heads, 32);
  EXPECT_EQ(model.n_kv_heads, 8);
  EXPECT_EQ(model.resolved_head_dim(), 64);
  EXPECT_EQ(model.ffn_dim, 8192);
  EXPECT_EQ(model.rope_theta, 500000.0);
  EXPECT_EQ(model.rope_scaling, "llama3");
  EXPECT_EQ(model.rope_scaling_factor, 32.0);
  EXPECT_EQ(model.rope_low_freq_factor, 1.0);
  EXPECT_EQ(model.rope_high_freq_factor, 4.0);
  EXPECT_EQ(model.rope_original_max_position, 8192);
  EXPECT_EQ(model.norm_eps, 1e-5);
  EXPECT_EQ(model.max_seq_len, 131072);
  EXPECT_TRUE(model.tie_embeddings);
  EXPECT_EQ(model.parameter_count(), 1235814400);  // the published count
}

TEST(TrainConfigPresets, Qwen3AndGemma3HaveThePublishedShapes) {
  ModelConfig qwen = parse_train_config({preset_path("qwen3-0.6b")}, {}).model;
  EXPECT_EQ(qwen.family, "qwen3");
  EXPECT_EQ(qwen.resolved_head_dim(), 128);
  EXPECT_TRUE(qwen.qk_norm);
  EXPECT_EQ(qwen.norm_eps, 1e-6);
  EXPECT_EQ(qwen.max_seq_len, 40960);
  // By hand: embeddings 151936*1024 = 155,582,464; per layer q 2048*1024 + k, v 1024*1024 each
  // + o 1024*2048 = 6,291,456, MLP 3*3072*1024 = 9,437,184, norms 2*1024 + 2*128 = 2,304:
  // 15,730,944 * 28 = 440,466,432; + final norm 1024.
  EXPECT_EQ(qwen.parameter_count(), 155582464 + 440466432 + 1024);

  ModelConfig gemma = parse_train_config({preset_path("gemma3-270m")}, {}).model;
  EXPECT_EQ(gemma.ffn_activation, FfnActivation::gelu_tanh);
  EXPECT_EQ(gemma.attention_scale, 0.0625f);  // 256^-0.5
  EXPECT_EQ(gemma.rope_theta_for_layer(0), 10000.0);
  EXPECT_EQ(gemma.rope_theta_for_layer(5), 1000000.0);
  EXPECT_EQ(gemma.embedding_scale, 0.0f);
  EXPECT_EQ(gemma.norm_weight_offset, 1.0f);
  // By hand: embeddings 262144*640 = 167,772,160; per layer q 1024*640 + k, v 256*640 each +
  // o 640*1024 = 1,638,400, MLP 3*2048*640 = 3,932,160, norms 4*640 + 2*256 = 3,072:
  // 5,573,632 * 18 = 100,325,376; + final norm 640.
  EXPECT_EQ(gemma.parameter_count(), 167772160 + 100325376 + 640);
}

TEST(TrainConfig, KeysAreDocumented) {
  auto keys = train_config_keys();
  EXPECT_EQ(keys.front().key, "model.family");
  EXPECT_EQ(keys.back().key, "run_dir");
  for (const auto& key : keys) {
    EXPECT_FALSE(key.doc.empty()) << key.key;
    EXPECT_FALSE(key.type.empty()) << key.key;
  }
}

}  // namespace
}  // namespace lathe
