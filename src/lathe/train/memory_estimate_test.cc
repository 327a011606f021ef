// The memory prediction against the process's own tensor-byte accounting on tiny models: the
// activations kept at the end of the forward, and the whole step's peak.
#include "lathe/models/memory_estimate.h"

#include <gtest/gtest.h>

#include "lathe/core/rng.h"
#include "lathe/train/train_step.h"
#include "test_seed.h"

namespace lathe {
namespace {

TrainConfig tiny_config(const std::string& variant, RematPolicy policy) {
  TrainConfig config;
  config.model.vocab_size = 300;
  config.model.d_model = 32;
  config.model.n_layers = 3;
  config.model.n_heads = 4;
  config.model.n_kv_heads = 2;
  config.model.ffn_dim = 80;
  config.model.max_seq_len = 32;
  if (variant == "qwen3") {
    config.model.family = "qwen3";
    config.model.qk_norm = true;
    config.model.head_dim = 12;
  } else if (variant == "qwen2") {
    config.model.family = "qwen2";
    config.model.attention_bias = true;
  } else if (variant == "gemma2") {
    config.model.family = "gemma2";
    config.model.sandwich_norms = true;
    config.model.tie_embeddings = true;
  }
  config.train.batch_size = 3;
  config.train.seq_len = 20;
  config.train.remat = policy;
  return config;
}

class MemoryEstimate : public ::testing::TestWithParam<std::tuple<const char*, RematPolicy>> {};

TEST_P(MemoryEstimate, MatchesTheBytesTheStepHolds) {
  const auto [variant, policy] = GetParam();
  const TrainConfig config = tiny_config(variant, policy);
  const int64_t batch = config.train.batch_size, seq = config.train.seq_len;
  const TrainingMemoryEstimate estimate = estimate_training_memory(config.model, batch, seq, policy);
  TransformerModel model(config.model);
  model.initialize(test_seed());
  SingleProcessCommunicator single_process;
  TrainStep train_step(model, config, single_process);
  Tensor ids = Tensor::empty({batch, seq}, DType::i32), targets = Tensor::empty({batch, seq}, DType::i32);
  fill_uniform(ids, test_seed(), 0, 300, 1);
  fill_uniform(targets, test_seed(), 0, 300, 2);

  // What the forward leaves alive for the backward is the counted activations, up to the
  // accounting's rounding of every allocation to 64 bytes (at most ~30 tensors per layer).
  const int64_t before_forward = tensor_bytes_in_use();
  {
    autograd::Tape tape;
    autograd::Var loss = model.loss(tape, ids, targets, policy);
    const int64_t held = tensor_bytes_in_use() - before_forward - 4;  // minus the loss itself
    EXPECT_GE(held, estimate.activation_bytes) << variant << " " << to_string(policy);
    EXPECT_LE(held, estimate.activation_bytes + 64 * 32 * (config.model.n_layers + 1))
        << variant << " " << to_string(policy);
  }

  // The peak of a whole step: the prediction bounds it from above, within 1.3x of it.
  const NextBatchSlice next_batch = single_process_batches(
      [&](const TensorView& inputs, const TensorView& step_targets) {
        for (int64_t i = 0; i < batch * seq; ++i) {
          inputs.ptr<int32_t>()[i] = ids.ptr<int32_t>()[i];
          step_targets.ptr<int32_t>()[i] = targets.ptr<int32_t>()[i];
        }
      },
      batch);
  train_step.run(1, next_batch);  // allocates AdamW's moments
  reset_tensor_bytes_peak();
  train_step.run(2, next_batch);
  const double ratio = static_cast<double>(tensor_bytes_peak()) / static_cast<double>(estimate.total_bytes());
  EXPECT_GT(ratio, 1.0 / 1.3) << variant << " " << to_string(policy);
  EXPECT_LE(ratio, 1.3) << variant << " " << to_string(policy);
}

INSTANTIATE_TEST_SUITE_P(Policies, MemoryEstimate,
                         ::testing::Combine(::testing::Values("llama", "qwen2", "qwen3", "gemma2"),
                                            ::testing::Values(RematPolicy::save_all, RematPolicy::recompute_layer,
                                                              RematPolicy::save_matmuls)));

}  // namespace
}  // namespace lathe
