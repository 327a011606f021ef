// TRANSITION (deleted with train_step()): TrainStep over SingleProcessCommunicator equals the old
// single-process train_step() bit for bit: losses, gradient norms, learning rates and weights.
#include <gtest/gtest.h>

#include "lathe/core/rng.h"
#include "lathe/train/train_step.h"
#include "test_seed.h"

namespace lathe {
namespace {

struct Variant {
  const char* name;
  const char* family;
  const char* format;
  int64_t batch, accum;
  RematPolicy remat;
  bool bf16;
};

void fill(uint64_t seed, int64_t call, const char* format, const TensorView& inputs, const TensorView& targets) {
  const int64_t n = inputs.numel();
  for (int64_t i = 0; i < n; ++i) {
    inputs.ptr<int32_t>()[i] = static_cast<int32_t>(uniform_at(seed, 2 * call, i) * 29);
    targets.ptr<int32_t>()[i] = static_cast<int32_t>(uniform_at(seed, 2 * call + 1, i) * 29);
    // SFT: a varying masked prefix per row.
    if (std::string(format) == "sft" && i % inputs.dim(1) < (call * 3 + i / inputs.dim(1)) % 11)
      targets.ptr<int32_t>()[i] = kIgnoredTarget;
  }
}

TEST(TrainStepTransition, EqualsTheOldSingleProcessStepBitwise) {
  const uint64_t seed = test_seed();
  const Variant variants[] = {
      {"text k=1", "llama", "text", 2, 1, RematPolicy::save_all, false},
      {"text k=3", "llama", "text", 2, 3, RematPolicy::save_all, false},
      {"text k=4 remat", "llama", "text", 1, 4, RematPolicy::recompute_layer, false},
      {"sft k=1", "llama", "sft", 2, 1, RematPolicy::save_all, false},
      {"sft k=3", "llama", "sft", 1, 3, RematPolicy::save_matmuls, false},
      {"gemma2 bf16 k=2", "gemma2", "text", 2, 2, RematPolicy::save_all, true},
  };
  for (const Variant& variant : variants) {
    SCOPED_TRACE(testing::Message() << variant.name << " LATHE_TEST_SEED=" << seed);
    TrainConfig config;
    config.model.family = variant.family;
    config.model.vocab_size = 29;
    config.model.d_model = 16;
    config.model.n_layers = 2;
    config.model.n_heads = 2;
    config.model.n_kv_heads = 1;
    config.model.head_dim = 8;
    config.model.ffn_dim = 24;
    config.model.max_seq_len = 16;
    config.model.init_std = 0.2;
    if (std::string(variant.family) == "gemma2") {  // tied LM head, soft caps, sliding window
      config.model.sandwich_norms = true;
      config.model.ffn_activation = FfnActivation::gelu_tanh;
      config.model.embedding_scale = 0;
      config.model.norm_weight_offset = 1;
      config.model.final_logit_softcap = 3;
      config.model.attn_logit_softcap = 2;
      config.model.sliding_window = 3;
      config.model.sliding_window_pattern = 2;
      config.model.tie_embeddings = true;
    }
    config.data.format = variant.format;
    config.train.batch_size = variant.batch;
    config.train.grad_accum = variant.accum;
    config.train.seq_len = 12;
    config.train.steps = 4;
    config.train.remat = variant.remat;
    config.optimizer.lr = 1e-2;
    config.optimizer.warmup_steps = 1;
    config.optimizer.grad_clip = 0.5;
    TransformerModel old_model(config.model), new_model(config.model);
    old_model.set_compute_dtype(variant.bf16 ? ComputeDtype::bf16 : ComputeDtype::f32);
    new_model.set_compute_dtype(variant.bf16 ? ComputeDtype::bf16 : ComputeDtype::f32);
    old_model.initialize(seed);
    new_model.initialize(seed);
    AdamWOptimizer old_optimizer(old_model.parameters(), config.optimizer);
    SingleProcessCommunicator communicator;
    TrainStep step(new_model, config, communicator);
    int64_t old_calls = 0, new_calls = 0;
    for (int64_t s = 1; s <= 4; ++s) {
      const StepResult old_result =
          train_step(old_model, old_optimizer, config, s, [&](const TensorView& inputs, const TensorView& targets) {
            fill(seed, old_calls++, variant.format, inputs, targets);
          });
      const StepResult new_result = step.run(s, single_process_batches(
                                                    [&](const TensorView& inputs, const TensorView& targets) {
                                                      fill(seed, new_calls++, variant.format, inputs, targets);
                                                    },
                                                    config.train.batch_size));
      EXPECT_EQ(new_result.loss, old_result.loss) << "step " << s;
      EXPECT_EQ(new_result.grad_norm, old_result.grad_norm) << "step " << s;
      EXPECT_EQ(new_result.lr, old_result.lr) << "step " << s;
    }
    for (size_t i = 0; i < old_model.parameters().size(); ++i)
      EXPECT_EQ(to_vector<float>(new_model.parameters()[i].var->value),
                to_vector<float>(old_model.parameters()[i].var->value))
          << old_model.parameters()[i].name;
  }
}

}  // namespace
}  // namespace lathe
