// Supervised fine-tuning through the trainer: the token-weighted gradient accumulation of masked
// targets (two micro-batches give the step of one batch holding both), and end-to-end runs of
// `data.format=sft` on a tiny model: the response loss falls, a stopped and resumed run logs the
// uninterrupted run's losses, and a model saved in HF format (save_hf_model) fine-tunes through
// load_from=hf:DIR and exports back to an HF directory that loads with the trained weights.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "lathe/data/sft_dataset.h"
#include "lathe/models/hf/hf_checkpoint.h"
#include "lathe/telemetry/metrics_log.h"
#include "lathe/text/bpe_tokenizer.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/load_from.h"
#include "lathe/train/train_step.h"
#include "lathe/train/trainer.h"
#include "quiet_training.h"
#include "scratch_directory.h"
#include "test_seed.h"

namespace lathe {
namespace {

TrainConfig tiny_model_config() {
  TrainConfig config;
  config.model.n_layers = 1;
  config.model.d_model = 32;
  config.model.n_heads = 2;
  config.model.n_kv_heads = 2;
  config.model.ffn_dim = 64;
  config.model.vocab_size = 300;
  config.model.max_seq_len = 64;
  config.train.seq_len = 8;
  config.optimizer.warmup_steps = 0;
  return config;
}

// (rows, 8) i32 inputs with `valid[row]` unmasked targets at the start of each row.
void fill_rows(const TensorView& inputs, const TensorView& targets, const std::vector<int>& valid, uint64_t seed,
               int first_row) {
  for (int64_t row = 0; row < inputs.dim(0); ++row)
    for (int64_t t = 0; t < 8; ++t) {
      const uint64_t draw = seed + static_cast<uint64_t>((first_row + row) * 8 + t) * 2654435761u;
      inputs.ptr<int32_t>()[row * 8 + t] = static_cast<int32_t>(draw % 300);
      targets.ptr<int32_t>()[row * 8 + t] =
          t < valid[static_cast<size_t>(first_row + row)] ? static_cast<int32_t>((draw >> 9) % 300) : kIgnoreTarget;
    }
}

StepResult one_step(TrainConfig config, int64_t batch, int64_t micro_batches, const std::vector<int>& valid,
                    uint64_t seed) {
  config.train.batch_size = batch;
  config.train.grad_accum = micro_batches;
  TransformerModel model(config.model);
  model.initialize(seed);
  SingleProcessCommunicator single_process;
  TrainStep train_step(model, config, single_process);
  int next_row = 0;
  return train_step.run(1, single_process_batches(
                               [&](const TensorView& inputs, const TensorView& targets) {
                                 fill_rows(inputs, targets, valid, seed, next_row);
                                 next_row += static_cast<int>(inputs.dim(0));
                               },
                               batch));
}

TEST(SftGradientAccumulation, MicroBatchesWeighByValidTargetsLikeOneBigBatch) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << seed);
  TrainConfig config = tiny_model_config();
  config.data.format = "sft";
  const std::vector<int> valid = {7, 1};  // row 0: 7 valid targets, row 1: 1
  const StepResult whole = one_step(config, 2, 1, valid, seed);
  const StepResult accumulated = one_step(config, 1, 2, valid, seed);
  EXPECT_NEAR(accumulated.loss, whole.loss, 1e-5 * std::abs(whole.loss));
  EXPECT_NEAR(accumulated.grad_norm, whole.grad_norm, 1e-4 * whole.grad_norm);
  // The plain 1/grad_accum weighting (text) would give the mean of the two micro-batch means.
  config.data.format = "text";
  const StepResult mean_of_means = one_step(config, 1, 2, valid, seed);
  EXPECT_GT(std::abs(mean_of_means.grad_norm - whole.grad_norm), 1e-3 * whole.grad_norm);
}

TEST(SftGradientAccumulation, WeightsAreSharesOfValidTargets) {
  Tensor a = Tensor::empty({1, 4}, DType::i32), b = Tensor::empty({1, 4}, DType::i32);
  const int32_t a_values[] = {5, kIgnoredTarget, 7, 9}, b_values[] = {kIgnoredTarget, kIgnoredTarget, 1, 2};
  std::copy(a_values, a_values + 4, a.ptr<int32_t>());
  std::copy(b_values, b_values + 4, b.ptr<int32_t>());
  EXPECT_EQ(micro_batch_weights({a, b}), (std::vector<double>{0.6, 0.4}));
  std::fill(a.ptr<int32_t>(), a.ptr<int32_t>() + 4, kIgnoredTarget);
  std::fill(b.ptr<int32_t>(), b.ptr<int32_t>() + 4, kIgnoredTarget);
  EXPECT_EQ(micro_batch_weights({a, b}), (std::vector<double>{0.0, 0.0}));
}

TEST(SftConfig, KeysValidateWithOneLineEach) {
  ScratchDirectory scratch;
  TrainConfig config;
  config.data.format = "sft";
  config.data.path = scratch.file("chats.jsonl");
  std::ofstream(config.data.path) << "{}\n";
  EXPECT_EQ(find_train_config_problems(config),
            std::vector<std::string>{
                "data.format=sft needs data.tokenizer (the tokenizer.json of the model being fine-tuned)"});
  config.data.path = scratch.path();
  config.data.tokenizer = scratch.file("tokenizer.json");
  std::ofstream(config.data.tokenizer) << "{}";
  EXPECT_EQ(find_train_config_problems(config),
            std::vector<std::string>{"data.path '" + scratch.path() +
                                     "' is a folder; data.format=sft expects one JSONL file of conversations"});
  TrainConfig parsed = parse_train_config({}, {"data.format=sft", "data.chat_template=gemma"});
  EXPECT_EQ(parsed.data.format, "sft");
  EXPECT_EQ(parsed.data.chat_template, "gemma");
  EXPECT_THROW(parse_train_config({}, {"data.chat_template=vicuna"}), Error);
  EXPECT_THROW(parse_train_config({}, {"data.format=chat"}), Error);
}

std::map<int64_t, double> logged_losses(const std::string& run_dir) {
  std::map<int64_t, double> losses;
  for (const Json& row : read_metrics_log(run_dir + "/metrics.jsonl"))
    if (row.find("loss")) losses[row.get("step").as_int()] = row.get("loss").as_number();
  return losses;
}

class SftTrainingEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    // Capital cities: a fixed answer per prompt, learnable in a few dozen steps.
    const char* const kPairs[][2] = {
        {"France", "Paris"}, {"Italy", "Rome"},     {"Spain", "Madrid"},  {"Japan", "Tokyo"}, {"Peru", "Lima"},
        {"Egypt", "Cairo"},  {"Chile", "Santiago"}, {"Kenya", "Nairobi"}, {"Cuba", "Havana"}, {"Iran", "Tehran"}};
    std::ofstream out(scratch_.file("capitals.jsonl"));
    std::vector<std::string> documents;
    for (int copy = 0; copy < 3; ++copy)
      for (const auto& pair : kPairs) {
        out << "{\"prompt\": \"Capital of " << pair[0] << "?\", \"response\": \"" << pair[1] << "\"}\n";
        documents.push_back(std::string("Capital of ") + pair[0] + "? " + pair[1]);
      }
    BpeTokenizer::train(documents, 290, {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
        .save(scratch_.file("tokenizer.json"));
  }
  TrainConfig config_in(const std::string& name) const {
    TrainConfig config = tiny_model_config();
    config.train.batch_size = 4;
    config.train.seq_len = 32;
    config.train.steps = 40;
    config.train.grad_accum = 2;
    config.train.seed = test_seed();
    config.optimizer.lr = 1e-2;
    config.optimizer.warmup_steps = 4;
    config.checkpoint.every = 0;
    config.log.every = 1;
    config.log.eval_every = 0;
    config.log.tensorboard = false;
    config.data.format = "sft";
    config.data.path = scratch_.file("capitals.jsonl");
    config.data.tokenizer = scratch_.file("tokenizer.json");
    config.data.val_fraction = 0.1;
    config.run_dir = scratch_.file(name);
    return config;
  }
  ScratchDirectory scratch_;
};

TEST_F(SftTrainingEndToEnd, ResponseLossFalls) {
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << test_seed());
  const TrainConfig config = config_in("run");
  const TrainSummary summary = train_quietly(config);
  const std::map<int64_t, double> losses = logged_losses(config.run_dir);
  ASSERT_EQ(losses.size(), 40u);
  const double first = losses.at(1), last = (losses.at(38) + losses.at(39) + losses.at(40)) / 3;
  EXPECT_GT(first, 4.0);  // about log(vocab) at the start
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
  EXPECT_TRUE(std::isfinite(summary.final_val_loss));
}

TEST_F(SftTrainingEndToEnd, StoppedAndResumedRunLogsTheSameLosses) {
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << test_seed());
  TrainConfig straight = config_in("straight"), resumed = config_in("resumed");
  straight.train.steps = resumed.train.steps = 10;
  train_quietly(straight);
  EXPECT_TRUE(train_quietly(resumed, /*stop_after_step=*/4).interrupted);
  EXPECT_EQ(train_quietly(resumed).first_step, 4);
  const std::map<int64_t, double> want = logged_losses(straight.run_dir), got = logged_losses(resumed.run_dir);
  ASSERT_EQ(want.size(), 10u);
  ASSERT_EQ(got.size(), 10u);
  for (const auto& [step, loss] : want) EXPECT_EQ(loss, got.at(step)) << "step " << step;
}

TEST_F(SftTrainingEndToEnd, FineTunesAnHfModelAndExportsItBack) {
  SCOPED_TRACE(testing::Message() << "LATHE_TEST_SEED=" << test_seed());
  TrainConfig config = config_in("run");
  TransformerModel pretrained(config.model);
  pretrained.initialize(test_seed() + 1);
  HfSaveOptions save_options;
  save_options.tokenizer_json = config.data.tokenizer;
  const std::string hf_in = scratch_.file("hf_in"), hf_out = scratch_.file("hf_out");
  save_hf_model(pretrained, hf_in, save_options);

  config.load_from = "hf:" + hf_in;
  config.data.tokenizer.clear();  // load_from supplies hf_in/tokenizer.json
  apply_load_from(config, {});
  EXPECT_EQ(config.data.tokenizer, hf_in + "/tokenizer.json");
  const TrainSummary summary = train_quietly(config);
  const std::map<int64_t, double> losses = logged_losses(config.run_dir);
  ASSERT_EQ(summary.last_step, 40);
  EXPECT_LT((losses.at(38) + losses.at(39) + losses.at(40)) / 3, 0.5 * losses.at(1));

  // Export the last checkpoint (as `lathe convert --to hf` does) and reload it.
  const LoadedCheckpoint checkpoint = load_checkpoint(config.run_dir + "/checkpoints/" + checkpoint_directory_name(40));
  TransformerModel tuned(config.model);
  for (Parameter& parameter : tuned.parameters())
    for (const auto& [name, tensor] : checkpoint.model)
      if (name == parameter.name) write_from_vector(parameter.var->value, to_vector<float>(tensor));
  save_hf_model(tuned, hf_out, save_options);
  const TransformerModel reloaded = load_hf_model(hf_out);
  ASSERT_EQ(reloaded.parameters().size(), tuned.parameters().size());
  bool any_changed = false;
  for (size_t i = 0; i < tuned.parameters().size(); ++i) {
    const std::vector<float> want = to_vector<float>(tuned.parameters()[i].var->value);
    EXPECT_EQ(to_vector<float>(reloaded.parameters()[i].var->value), want) << tuned.parameters()[i].name;
    any_changed = any_changed || to_vector<float>(pretrained.parameters()[i].var->value) != want;
  }
  EXPECT_TRUE(any_changed) << "fine-tuning left every weight of the HF model as it was";
}

}  // namespace
}  // namespace lathe
