// End-to-end trainer tests through the C++ API (run_training on a tiny model and a generated
// corpus): an interrupted and resumed run equals an uninterrupted one bitwise, a damaged newest
// checkpoint falls back to the previous one, and a resume with another model is refused.
// The CLI-level checks (signals, SIGKILL mid-checkpoint, bad input) are in tests/integration.
#include "lathe/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "lathe/core/rng.h"
#include "lathe/io/durable_file.h"
#include "lathe/telemetry/metrics_log.h"
#include "lathe/train/checkpoint.h"
#include "quiet_training.h"
#include "scratch_directory.h"
#include "test_seed.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

// A few hundred fortune-style documents from a small vocabulary: enough text for a 300-token
// tokenizer and 12 steps of 2 x 32 tokens.
void write_corpus(const std::string& path, uint64_t seed) {
  static const char* const kWords[] = {"the",  "quick", "brown", "fox",    "jumps", "over", "a",
                                       "lazy", "dog",   "model", "learns", "from",  "text", "and",
                                       "loss", "goes",  "down",  "slowly", "every", "night"};
  constexpr uint64_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);
  uint64_t draw = 0;
  auto next_below = [&](uint64_t bound) { return static_cast<uint64_t>(uniform_at(seed, 0, draw++) * bound); };
  std::ofstream out(path);
  for (int document = 0; document < 200; ++document) {
    if (document > 0) out << "%\n";
    const uint64_t length = 10 + next_below(30);
    for (uint64_t i = 0; i < length; ++i) out << (i ? " " : "") << kWords[next_below(kWordCount)];
    out << ".\n";
  }
}

TrainConfig tiny_config(const std::string& corpus, const std::string& run_dir) {
  TrainConfig config;
  config.model.n_layers = 1;
  config.model.d_model = 64;
  config.model.n_heads = 2;
  config.model.n_kv_heads = 2;
  config.model.ffn_dim = 128;
  config.model.vocab_size = 300;
  config.model.max_seq_len = 64;
  config.train.batch_size = 2;
  config.train.seq_len = 32;
  config.train.steps = 12;
  config.optimizer.warmup_steps = 2;
  config.checkpoint.every = 4;
  config.log.every = 1;
  config.log.eval_every = 0;
  config.log.eval_batches = 2;
  config.log.tensorboard = false;
  config.data.path = corpus;
  config.run_dir = run_dir;
  return config;
}

std::string checkpoint_path(const TrainConfig& config, int64_t step, const std::string& file = "") {
  return config.run_dir + "/checkpoints/" + checkpoint_directory_name(step) + (file.empty() ? "" : "/" + file);
}

// step -> loss of the metrics log; a step logged twice (a resumed run) keeps its later row.
std::map<int64_t, double> logged_losses(const TrainConfig& config) {
  std::map<int64_t, double> losses;
  for (const Json& row : read_metrics_log(config.run_dir + "/metrics.jsonl"))
    if (row.find("loss")) losses[row.get("step").as_int()] = row.get("loss").as_number();
  return losses;
}

void expect_bitwise_equal(const NamedTensors& expected, const NamedTensors& actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, want] = expected[i];
    const auto& [actual_name, got] = actual[i];
    ASSERT_EQ(name, actual_name) << what;
    ASSERT_EQ(want.shape(), got.shape()) << what << " " << name;
    ASSERT_EQ(want.dtype(), got.dtype()) << what << " " << name;
    EXPECT_EQ(0, std::memcmp(want.view().data, got.view().data, want.numel() * dtype_size(want.dtype())))
        << what << ": tensor " << name << " differs";
  }
}

void expect_resume_is_bitwise(const TrainConfig& straight, const TrainConfig& resumed,
                              const TrainConfig* resumed_later = nullptr);

class TrainerEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override { write_corpus(corpus(), test_seed()); }
  std::string corpus() const { return scratch_.file("corpus.txt"); }
  TrainConfig config_in(const std::string& name) const { return tiny_config(corpus(), scratch_.file(name)); }

  ScratchDirectory scratch_;
};

// Trains `straight` in one go and `resumed` (the same config in another run_dir) stopped after
// step 5 and resumed (with `resumed_later` where given: the config the second process runs); both
// must end bitwise equal, every logged loss included.
void expect_resume_is_bitwise(const TrainConfig& straight, const TrainConfig& resumed,
                              const TrainConfig* resumed_later) {
  const TrainSummary straight_summary = train_quietly(straight);
  EXPECT_EQ(straight_summary.last_step, 12);
  EXPECT_FALSE(straight_summary.interrupted);

  // Step 5 is not a checkpoint step: the stop itself must save one, mid-way between two.
  const TrainSummary first_part = train_quietly(resumed, /*stop_after_step=*/5);
  EXPECT_TRUE(first_part.interrupted);
  EXPECT_EQ(first_part.last_step, 5);
  ASSERT_TRUE(fs::exists(checkpoint_path(resumed, 5, "manifest.json")));
  const std::map<int64_t, double> losses_before_resume = logged_losses(resumed);
  const TrainSummary second_part = train_quietly(resumed_later ? *resumed_later : resumed);
  EXPECT_EQ(second_part.first_step, 5);
  EXPECT_EQ(second_part.last_step, 12);
  EXPECT_FALSE(second_part.interrupted);

  // The final checkpoints: the same bytes, file for file (model and optimizer state).
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(read_file_contents(checkpoint_path(straight, 12, file)) ==
                read_file_contents(checkpoint_path(resumed, 12, file)))
        << file << " of the resumed run differs from the uninterrupted run's";
  const LoadedCheckpoint want = load_checkpoint(checkpoint_path(straight, 12));
  const LoadedCheckpoint got = load_checkpoint(checkpoint_path(resumed, 12));
  expect_bitwise_equal(want.model, got.model, "model");
  expect_bitwise_equal(want.optimizer, got.optimizer, "optimizer");

  // Every step's loss, those logged after the resume included, is the uninterrupted run's.
  const std::map<int64_t, double> want_losses = logged_losses(straight);
  const std::map<int64_t, double> got_losses = logged_losses(resumed);
  ASSERT_EQ(want_losses.size(), 12u);
  ASSERT_EQ(losses_before_resume.size(), 5u);  // steps 6..12 below come from the resumed process
  ASSERT_EQ(got_losses.size(), 12u);
  for (const auto& [step, loss] : want_losses) {
    ASSERT_TRUE(got_losses.count(step)) << "step " << step;
    EXPECT_EQ(loss, got_losses.at(step)) << "loss of step " << step;
  }
  EXPECT_EQ(straight_summary.final_train_loss, second_part.final_train_loss);
}

TEST_F(TrainerEndToEnd, StoppedAndResumedRunEqualsUninterruptedRunBitwise) {
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << test_seed());
  expect_resume_is_bitwise(config_in("straight"), config_in("resumed"));
}

// train.dtype=auto decides by peaks measured at start, which a busy machine can tip; a resumed run
// keeps the precision its checkpoint recorded. Both ways: a run begun in f32 (a CPU where auto
// picks bf16 makes this one real) and one begun in bf16 (real where auto picks f32;
// LATHE_FORCE_BF16 lets explicit bf16 run the bf16 path on any CPU) continue under auto bitwise.
TEST_F(TrainerEndToEnd, AResumedRunKeepsTheCheckpointsPrecisionUnderAuto) {
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << test_seed());
  ::setenv("LATHE_FORCE_BF16", "1", 1);
  for (ComputeDtype begun_in : {ComputeDtype::f32, ComputeDtype::bf16}) {
    SCOPED_TRACE(to_string(begun_in));
    TrainConfig straight = config_in(str_cat("straight_", to_string(begun_in)));
    TrainConfig resumed = config_in(str_cat("resumed_", to_string(begun_in)));
    straight.train.dtype = resumed.train.dtype = begun_in;
    TrainConfig resumed_under_auto = resumed;
    resumed_under_auto.train.dtype = ComputeDtype::automatic;
    expect_resume_is_bitwise(straight, resumed, &resumed_under_auto);
    EXPECT_EQ(load_checkpoint(checkpoint_path(resumed, 12)).trainer_state.get("compute_dtype").as_string(),
              to_string(begun_in));
  }
  ::unsetenv("LATHE_FORCE_BF16");
}

// A mixture-of-experts model: the router losses and expert load are part of every step, and the
// resume is just as exact; metrics.jsonl carries each MoE layer's expert load.
TEST_F(TrainerEndToEnd, MixtureOfExpertsResumesBitwiseAndLogsExpertLoad) {
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << test_seed());
  auto moe = [&](const std::string& name) {
    TrainConfig config = config_in(name);
    config.model.family = "mixtral";
    config.model.n_layers = 2;
    config.model.moe_experts = 4;
    config.model.moe_top_k = 2;
    config.model.moe_ffn_dim = 32;
    config.model.moe_aux_loss_coef = 0.05;
    config.model.moe_z_loss_coef = 0.01;
    return config;
  };
  const TrainConfig straight = moe("straight"), resumed = moe("resumed");
  expect_resume_is_bitwise(straight, resumed);
  const std::vector<Json> rows = read_metrics_log(straight.run_dir + "/metrics.jsonl");
  ASSERT_FALSE(rows.empty());
  const Json& row = rows.front();
  const int64_t tokens_times_k = 2 * 32 * 2;  // batch x seq x top_k slots in a step
  for (int layer : {0, 1}) {
    const std::string prefix = "expert_load." + std::to_string(layer) + ".";
    ASSERT_TRUE(row.find(prefix + "min") && row.find(prefix + "max") && row.find(prefix + "mean")) << row.dump();
    EXPECT_EQ(row.get(prefix + "mean").as_number(), static_cast<double>(tokens_times_k) / 4);
    EXPECT_LE(row.get(prefix + "min").as_number(), row.get(prefix + "mean").as_number());
    EXPECT_GE(row.get(prefix + "max").as_number(), row.get(prefix + "mean").as_number());
    EXPECT_LE(row.get(prefix + "max").as_number(), 2 * 32);  // an expert gets a token at most once
  }
  // Uniform routing would give exactly top_k; any routing gives at least about 1 (it is E * <tpe, P>).
  EXPECT_GT(row.get("aux_loss").as_number(), 0.5);
  EXPECT_GT(row.get("z_loss").as_number(), 0.0);
}

// DeepSeek-V3 with a trained multi-token prediction module and the selection bias: both are part
// of the state a resume must restore bitwise; metrics.jsonl logs the MTP loss.
TEST_F(TrainerEndToEnd, DeepseekWithMultiTokenPredictionResumesBitwise) {
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << test_seed());
  auto deepseek = [&](const std::string& name) {
    TrainConfig config = config_in(name);
    ModelConfig& m = config.model;
    m.family = "deepseek_v3";
    m.n_layers = 2;
    m.n_kv_heads = m.n_heads;
    m.kv_lora_rank = 16, m.q_lora_rank = 12, m.qk_nope_head_dim = 8, m.qk_rope_head_dim = 4, m.v_head_dim = 6;
    m.rope_interleave = true;
    m.moe_experts = 4, m.moe_top_k = 2, m.moe_ffn_dim = 16, m.moe_shared_ffn_dim = 16, m.moe_first_dense_layers = 1;
    m.moe_router_scoring = "sigmoid";
    m.moe_bias_update_rate = 0.001;
    m.moe_aux_loss_coef = 0;
    m.mtp_layers = 1;
    m.mtp_loss_weight = 0.3;
    return config;
  };
  const TrainConfig straight = deepseek("straight"), resumed = deepseek("resumed");
  expect_resume_is_bitwise(straight, resumed);
  const std::vector<Json> rows = read_metrics_log(straight.run_dir + "/metrics.jsonl");
  ASSERT_FALSE(rows.empty());
  ASSERT_TRUE(rows.front().find("mtp_loss")) << rows.front().dump();
  EXPECT_GT(rows.front().get("mtp_loss").as_number(), 1.0);  // a cross-entropy over the vocabulary, untrained
}

TEST_F(TrainerEndToEnd, TruncatedNewestCheckpointResumesFromThePreviousOne) {
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << test_seed());
  const TrainConfig straight = config_in("straight");
  train_quietly(straight);
  const TrainConfig damaged = config_in("damaged");
  train_quietly(damaged, /*stop_after_step=*/8);  // checkpoints at steps 4 and 8
  const std::string model_file = checkpoint_path(damaged, 8, "model.safetensors");
  fs::resize_file(model_file, fs::file_size(model_file) / 2);

  const TrainSummary resumed = train_quietly(damaged);
  EXPECT_EQ(resumed.first_step, 4);
  EXPECT_EQ(resumed.last_step, 12);
  EXPECT_TRUE(read_file_contents(checkpoint_path(straight, 12, "model.safetensors")) ==
              read_file_contents(checkpoint_path(damaged, 12, "model.safetensors")))
      << "resuming from step 4 after a damaged step 8 must still give the uninterrupted weights";
}

TEST_F(TrainerEndToEnd, ResumeWithAnotherModelIsRefusedNamingTheKeyAndTouchesNothing) {
  const TrainConfig first = config_in("run");
  train_quietly(first, /*stop_after_step=*/2);
  const std::vector<std::string> kept = {checkpoint_path(first, 2, "model.safetensors"),
                                         checkpoint_path(first, 2, "manifest.json"), first.run_dir + "/tokenizer.json",
                                         first.run_dir + "/config.yaml"};
  std::vector<std::string> before;
  for (const std::string& file : kept) before.push_back(read_file_contents(file));

  // Another vocabulary also means another tokenizer: it must not replace the run's own.
  TrainConfig other = first;
  other.model.vocab_size = 280;
  try {
    train_quietly(other);
    FAIL() << "a resume with model.vocab_size changed was accepted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("model.vocab_size is 300 there but 280 now"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line expected: " << message;
  }
  for (size_t i = 0; i < kept.size(); ++i)
    EXPECT_TRUE(read_file_contents(kept[i]) == before[i]) << kept[i] << " changed by the refused resume";
}

}  // namespace
}  // namespace lathe
