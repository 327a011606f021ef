// bf16 compute with f32 master weights (TransformerModel::set_compute_dtype) on tiny models:
//  - loss and every gradient track the f32 path within bf16's rounding (tolerance below);
//  - every rematerialisation policy gives bitwise the gradients of saving everything;
//  - a few AdamW steps lower the loss, and the optimizer keeps the bf16 copies equal to the
//    rounded master weights;
//  - a run resumed from (master weights, optimizer state) equals the uninterrupted one bitwise;
//  - the first two also with attention in bf16, which bf16 runs take where AMX is active.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/amx.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/rng.h"
#include "lathe/train/train_step.h"
#include "test_seed.h"
#include "tiny_model.h"

namespace lathe {
namespace {

using autograd::Tape;

// Variants: "llama", "gemma2", and either with "+attention": attention in bf16 too (what a bf16
// run does where AMX is active; here its kernels run on the vector path or the tile emulation).
bool with_bf16_attention(const std::string& variant) { return variant.find("+attention") != std::string::npos; }

ModelConfig tiny_config(const std::string& variant) {
  ModelConfig config = tiny_model_config({.head_dim = 8, .max_seq_len = 16});
  config.init_std = 0.2;
  if (variant.rfind("gemma2", 0) == 0) {  // tied LM head (the embedding table gets the bf16 copy), soft caps
    config.family = "gemma2";
    config.sandwich_norms = true;
    config.ffn_activation = FfnActivation::gelu_tanh;
    config.embedding_scale = 0;
    config.norm_weight_offset = 1;
    config.final_logit_softcap = 3;
    config.attn_logit_softcap = 2;
    config.sliding_window = 3;
    config.sliding_window_pattern = 2;
    config.tie_embeddings = true;
  }
  return config;
}

void fill_batch(const ModelConfig& config, uint64_t seed, uint64_t stream, const TensorView& ids,
                const TensorView& targets) {
  fill_uniform(ids, seed, 0, static_cast<double>(config.vocab_size), 2 * stream);
  fill_uniform(targets, seed, 0, static_cast<double>(config.vocab_size), 2 * stream + 1);
}

void use_bf16(TransformerModel& model, const std::string& variant) {
  model.set_compute_dtype(ComputeDtype::bf16);
  if (with_bf16_attention(variant)) model.set_attention_dtype(DType::bf16);
}

double run_backward(TransformerModel& model, const Tensor& ids, const Tensor& targets, RematPolicy remat) {
  model.zero_grads();
  Tape tape;
  autograd::Var loss = model.loss(tape, ids, targets, remat);
  tape.backward(loss);
  return read_element(loss->value, 0);
}

// Whether any element of any parameter's gradient differs bitwise between two models of one config.
bool any_gradient_differs(const TransformerModel& a, const TransformerModel& b) {
  for (size_t i = 0; i < a.parameters().size(); ++i)
    if (to_vector<float>(a.parameters()[i].var->grad) != to_vector<float>(b.parameters()[i].var->grad)) return true;
  return false;
}

class Bf16Variants : public ::testing::TestWithParam<const char*> {};

// Tolerance: bf16 keeps 8 significant bits, so each rounded operand carries a relative error of
// at most u = 2^-9 ~ 2e-3. The loss is a mean over tokens, which averages the errors: 4u. A
// gradient compounds them: layer 0's has passed through every rounded backward product (g, W
// and x rounded at each), softmax and normalisation backward (differences of nearly equal terms)
// and, in this tiny model, dot products of only 16-24 terms that average little. How much a
// gradient amplifies rounding depends on the draw, so the bound measures it: a third f32 model
// takes the weights times (1 +- u), a sign per weight (what one bf16 rounding of every weight
// could do), and its gradient's move from the f32 one is the "nudge". Measured over 1,333 seeds
// per variant (28,000 and 32,000 gradients): the bf16 error was 5.5u / 6.9u of the gradient's
// norm in the median (llama / gemma2), 83u at worst (gemma2; a fixed 64u failed 1 seed in 130),
// and 0.8-1.0x the nudge in the median, 7x at worst. The bound 32u + 8 x nudge was at most 60%
// used by any of them. With attention in bf16 too (q, k, v, o, do, dq, dk, dv rounded; 150 seeds
// of each variant, 1,000 more of gemma2's): 6.0u / 7.6u in the median, 86u at worst, the bound at
// most 70% used (one seed; the next worst 50%). An f32-vs-bf16 mix-up (a wrong operand, a stale copy) gives O(1)
// errors, against a bound near 0.2 of the norm. The gradients must differ from f32's at all, so the bf16 path is known
// to have run: the loss alone can coincide to the last bit (its relative move was as small as 5e-7 in 300 seeds, a
// few float ulps; seed 683900668 hit it), the thousands of gradient elements cannot all do so.
TEST_P(Bf16Variants, LossAndGradientsTrackTheF32Path) {
  const uint64_t seed = test_seed();
  const double u = std::ldexp(1.0, -9);
  TransformerModel f32_model(tiny_config(GetParam()));
  TransformerModel bf16_model(tiny_config(GetParam()));
  f32_model.initialize(seed);
  use_bf16(bf16_model, GetParam());
  bf16_model.initialize(seed);
  Tensor ids = Tensor::empty({2, 12}, DType::i32), targets = Tensor::empty({2, 12}, DType::i32);
  fill_batch(f32_model.config(), seed, 0, ids, targets);
  const double f32_loss = run_backward(f32_model, ids, targets, RematPolicy::save_all);
  const double bf16_loss = run_backward(bf16_model, ids, targets, RematPolicy::save_all);
  TransformerModel nudged(tiny_config(GetParam()));
  nudged.initialize(seed);
  for (size_t i = 0; i < nudged.parameters().size(); ++i) {
    std::vector<float> weights = to_vector<float>(f32_model.parameters()[i].var->value);
    for (size_t j = 0; j < weights.size(); ++j)
      weights[j] *= static_cast<float>(1 + (uniform_at(seed, 17, i * 1000003 + j) < 0.5 ? -u : u));
    write_from_vector(nudged.parameters()[i].var->value, weights);
  }
  run_backward(nudged, ids, targets, RematPolicy::save_all);
  EXPECT_NEAR(bf16_loss, f32_loss, 4 * u * f32_loss) << GetParam() << " seed " << seed;
  EXPECT_TRUE(any_gradient_differs(bf16_model, f32_model))
      << "the bf16 path left every gradient bitwise unchanged; seed " << seed;
  if (with_bf16_attention(GetParam())) {  // the attention's roundings change the gradients too
    TransformerModel linear_only(tiny_config(GetParam()));
    linear_only.set_compute_dtype(ComputeDtype::bf16);
    linear_only.set_attention_dtype(DType::f32);
    linear_only.initialize(seed);
    run_backward(linear_only, ids, targets, RematPolicy::save_all);
    EXPECT_TRUE(any_gradient_differs(linear_only, bf16_model)) << "bf16 attention changed no gradient; seed " << seed;
  }
  for (size_t i = 0; i < f32_model.parameters().size(); ++i) {
    const std::vector<double> want = to_vector<double>(f32_model.parameters()[i].var->grad);
    const std::vector<double> got = to_vector<double>(bf16_model.parameters()[i].var->grad);
    const std::vector<double> nudged_grad = to_vector<double>(nudged.parameters()[i].var->grad);
    double error = 0, nudge = 0, norm = 0;
    for (size_t j = 0; j < want.size(); ++j) {
      error += (got[j] - want[j]) * (got[j] - want[j]);
      nudge += (nudged_grad[j] - want[j]) * (nudged_grad[j] - want[j]);
      norm += want[j] * want[j];
    }
    EXPECT_LE(std::sqrt(error), 32 * u * std::sqrt(norm) + 8 * std::sqrt(nudge))
        << GetParam() << " " << f32_model.parameters()[i].name << " seed " << seed << " (the nudge moved it by "
        << std::sqrt(nudge) << ", norm " << std::sqrt(norm) << ")";
  }
}

TEST_P(Bf16Variants, RematerialisationPoliciesGiveIdenticalGradients) {
  const uint64_t seed = test_seed();
  TransformerModel model(tiny_config(GetParam()));
  use_bf16(model, GetParam());
  model.initialize(seed);
  Tensor ids = Tensor::empty({2, 11}, DType::i32), targets = Tensor::empty({2, 11}, DType::i32);
  fill_batch(model.config(), seed, 0, ids, targets);
  const double loss = run_backward(model, ids, targets, RematPolicy::save_all);
  std::vector<std::vector<float>> expected;
  for (const Parameter& parameter : model.parameters()) expected.push_back(to_vector<float>(parameter.var->grad));
  for (RematPolicy policy : {RematPolicy::recompute_layer, RematPolicy::save_matmuls}) {
    EXPECT_EQ(run_backward(model, ids, targets, policy), loss) << to_string(policy);
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ(to_vector<float>(model.parameters()[i].var->grad), expected[i])
          << GetParam() << " " << to_string(policy) << " " << model.parameters()[i].name << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Bf16Variants,
                         ::testing::Values("llama", "gemma2", "llama+attention", "gemma2+attention"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '+') c = '_';
                           return name;
                         });

// Attention follows a bf16 run into bf16 only where its kernels multiply bf16 faster than f32
// (AMX tiles, or vdpbf16ps where it outruns the FMAs): elsewhere the bf16 kernel would widen to
// f32 and only add roundings. f32 resets it.
TEST(Bf16Training, AttentionTakesBf16WhereItsProductsRunFaster) {
  TransformerModel model(tiny_config("llama"));
  EXPECT_EQ(model.attention_dtype(), DType::f32);
  model.set_compute_dtype(ComputeDtype::bf16);
  EXPECT_EQ(model.attention_dtype(), amx_active() || bf16_dot_outruns_fma() ? DType::bf16 : DType::f32);
  model.set_attention_dtype(DType::bf16);
  model.set_compute_dtype(ComputeDtype::f32);
  EXPECT_EQ(model.attention_dtype(), DType::f32);
}

TrainConfig tiny_train_config() {
  TrainConfig config;
  config.model = tiny_config("llama");
  config.train.batch_size = 2;
  config.train.seq_len = 12;
  config.train.steps = 6;
  config.train.dtype = ComputeDtype::bf16;
  config.optimizer.lr = 1e-2;
  config.optimizer.warmup_steps = 0;
  config.optimizer.schedule = LrSchedule::constant;
  return config;
}

// Steps first..last of a run whose step k trains on batch k.
void train_steps(TrainStep& train_step, const TrainConfig& config, int64_t first, int64_t last, uint64_t seed,
                 std::vector<double>* losses) {
  for (int64_t step = first; step <= last; ++step) {
    const StepResult result =
        train_step.run(step, single_process_batches(
                                 [&](const TensorView& ids, const TensorView& targets) {
                                   fill_batch(config.model, seed, static_cast<uint64_t>(step), ids, targets);
                                 },
                                 config.train.batch_size));
    if (losses) losses->push_back(result.loss);
  }
}

void expect_copies_are_rounded_masters(const TransformerModel& model, const char* when) {
  int copies = 0;
  for (const Parameter& parameter : model.parameters()) {
    if (!parameter.var->value_bf16.defined()) continue;
    ++copies;
    const Tensor rounded = convert(parameter.var->value, DType::bf16);
    EXPECT_EQ(to_vector<float>(parameter.var->value_bf16), to_vector<float>(rounded)) << when << " " << parameter.name;
  }
  EXPECT_EQ(copies, 7 * model.config().n_layers + 1);  // q k v o gate up down per layer, lm_head
}

TEST(Bf16Training, LossFallsAndTheCopiesFollowTheMasterWeights) {
  const uint64_t seed = test_seed();
  TrainConfig config = tiny_train_config();
  TransformerModel model(config.model);
  model.set_compute_dtype(ComputeDtype::bf16);
  model.initialize(seed);
  SingleProcessCommunicator single_process;
  TrainStep train_step(model, config, single_process);
  // One batch over and over: its loss must fall.
  const NextBatchSlice same_batch = single_process_batches(
      [&](const TensorView& ids, const TensorView& targets) { fill_batch(config.model, seed, 0, ids, targets); },
      config.train.batch_size);
  std::vector<double> losses;
  for (int64_t step = 1; step <= config.train.steps; ++step) losses.push_back(train_step.run(step, same_batch).loss);
  EXPECT_LT(losses.back(), 0.9 * losses.front()) << "seed " << seed;
  expect_copies_are_rounded_masters(model, "after training");
}

TEST(Bf16Training, ResumeFromMasterWeightsAndOptimizerStateIsBitwise) {
  const uint64_t seed = test_seed();
  const TrainConfig config = tiny_train_config();
  TransformerModel uninterrupted(config.model);
  uninterrupted.set_compute_dtype(ComputeDtype::bf16);
  uninterrupted.initialize(seed);
  SingleProcessCommunicator single_process;
  TrainStep uninterrupted_step(uninterrupted, config, single_process);
  std::vector<double> expected_losses;
  train_steps(uninterrupted_step, config, 1, 3, seed, nullptr);
  // What a checkpoint holds: the f32 master weights and the optimizer moments (no bf16 copies).
  std::vector<std::vector<float>> saved_weights;
  for (const Parameter& parameter : uninterrupted.parameters())
    saved_weights.push_back(to_vector<float>(parameter.var->value));
  std::vector<std::pair<std::string, Tensor>> saved_state;
  for (const auto& [name, tensor] : uninterrupted_step.whole_optimizer()->state())
    saved_state.emplace_back(name, convert(tensor, DType::f32));
  train_steps(uninterrupted_step, config, 4, 6, seed, &expected_losses);

  // The trainer's load path: a fresh model in bf16 mode, weights written, copies refreshed.
  TransformerModel resumed(config.model);
  resumed.set_compute_dtype(ComputeDtype::bf16);
  resumed.initialize(seed + 1);  // different values, all overwritten below
  for (size_t i = 0; i < saved_weights.size(); ++i)
    write_from_vector(resumed.parameters()[i].var->value, saved_weights[i]);
  resumed.refresh_bf16_weights();
  TrainStep resumed_step(resumed, config, single_process);
  resumed_step.whole_optimizer()->load_state(saved_state);
  std::vector<double> resumed_losses;
  train_steps(resumed_step, config, 4, 6, seed, &resumed_losses);

  EXPECT_EQ(resumed_losses, expected_losses) << "seed " << seed;
  for (size_t i = 0; i < resumed.parameters().size(); ++i) {
    const Parameter& parameter = resumed.parameters()[i];
    EXPECT_EQ(to_vector<float>(parameter.var->value), to_vector<float>(uninterrupted.parameters()[i].var->value))
        << parameter.name << " seed " << seed;
  }
  expect_copies_are_rounded_masters(resumed, "after resuming");
}

}  // namespace
}  // namespace lathe
