// linear_cross_entropy: finite-difference check of the reference gradients, independence of the
// chunk sizes, independently derivable values (uniform logits give log(vocab); softmax - onehot
// sums to zero over the vocabulary), all-ignored batches, and validation errors.
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/half.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "lathe/ops/problem.h"
#include "test_seed.h"

namespace lathe {
namespace {

struct Buffers {
  Tensor hidden, weight, targets, loss, dhidden, dweight, lse;
  LinearCrossEntropyArgs args;
};

// Random inputs; token t is ignored when ignored(t). Outputs are f32 unless output_dtype says otherwise.
Buffers make_buffers(int64_t tokens, int64_t d_model, int64_t vocab, DType dtype, uint64_t seed, double ignore_fraction,
                     DType output_dtype = DType::f32) {
  Buffers b;
  b.hidden = Tensor::empty({tokens, d_model}, dtype);
  b.weight = Tensor::empty({vocab, d_model}, dtype);
  fill_uniform(b.hidden, seed, -1, 1, 1);
  double range = 2.0 / std::sqrt(static_cast<double>(d_model));
  fill_uniform(b.weight, seed, -range, range, 2);
  b.targets = Tensor::empty({tokens}, DType::i32);
  for (int64_t t = 0; t < tokens; ++t) {
    bool ignored = uniform_at(seed, 3, t) < ignore_fraction;
    write_element(b.targets, t, ignored ? -100.0 : std::floor(uniform_at(seed, 4, t) * vocab));
  }
  b.loss = Tensor::empty({1}, output_dtype);
  b.dhidden = Tensor::empty({tokens, d_model}, output_dtype);
  b.dweight = Tensor::empty({vocab, d_model}, output_dtype);
  b.lse = Tensor::empty({tokens}, output_dtype);
  for (const Tensor* out : {&b.loss, &b.dhidden, &b.dweight, &b.lse}) poison(*out);
  b.args = {b.hidden, b.weight, b.targets, b.loss, b.dhidden, b.dweight, b.lse};
  return b;
}

double max_abs_difference(const TensorView& a, const TensorView& b) {
  std::vector<double> x = to_vector<double>(a), y = to_vector<double>(b);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::isnan(x[i]) || std::isnan(y[i]) ? INFINITY : std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

double reference_loss(const LinearCrossEntropyArgs& args) {
  linear_cross_entropy_reference<double>(args);
  return read_element(args.loss, 0);
}

TEST(LinearCrossEntropy, ReferenceGradientsMatchFiniteDifferences) {
  uint64_t seed = test_seed();
  struct Case {
    float softcap, z_loss, logit_scale;
  };
  for (Case c : {Case{0, 0, 1}, Case{1.5f, 0.1f, 1.3f}, Case{0, 0.2f, 0.7f}}) {
    // float64 inputs and outputs: the reference reads and writes any dtype.
    Buffers b = make_buffers(5, 6, 7, DType::f64, seed, 0.3, DType::f64);
    write_element(b.targets, 0, -100);  // at least one ignored token
    write_element(b.targets, 1, 3);     // and at least one valid one
    b.args.softcap = c.softcap;
    b.args.z_loss = c.z_loss;
    b.args.logit_scale = c.logit_scale;
    linear_cross_entropy_reference<double>(b.args);
    std::vector<double> dhidden = to_vector<double>(b.dhidden), dweight = to_vector<double>(b.dweight);
    const double step = 1e-6;
    auto check = [&](const Tensor& input, const std::vector<double>& analytic, const char* name) {
      for (int64_t i = 0; i < input.numel(); ++i) {
        double original = read_element(input, i);
        write_element(input, i, original + step);
        double plus = reference_loss(b.args);
        write_element(input, i, original - step);
        double minus = reference_loss(b.args);
        write_element(input, i, original);
        double numeric = (plus - minus) / (2 * step);
        EXPECT_NEAR(analytic[i], numeric, 1e-7 + 1e-6 * std::fabs(numeric))
            << name << "[" << i << "] softcap=" << c.softcap << " z_loss=" << c.z_loss << " seed=" << seed;
      }
    };
    check(b.hidden, dhidden, "dhidden");
    check(b.weight, dweight, "dweight");
  }
}

TEST(LinearCrossEntropy, GradScaleScalesGradientsNotLoss) {
  uint64_t seed = test_seed();
  Buffers base = make_buffers(6, 5, 11, DType::f64, seed, 0.2, DType::f64);
  Buffers scaled = make_buffers(6, 5, 11, DType::f64, seed, 0.2, DType::f64);
  scaled.args.grad_scale = 2.5f;
  linear_cross_entropy_reference<double>(base.args);
  linear_cross_entropy_reference<double>(scaled.args);
  EXPECT_EQ(read_element(base.loss, 0), read_element(scaled.loss, 0)) << "seed=" << seed;
  for (int64_t i = 0; i < base.dweight.numel(); ++i)
    EXPECT_NEAR(2.5 * read_element(base.dweight, i), read_element(scaled.dweight, i), 1e-14) << "seed=" << seed;
}

// Runs every usable implementation at several chunk configs and compares with its own run in one
// big chunk (implementations differ from each other by their precision: the amx paths' dlogits
// carry about 16 bits; the contract tests bound each against the float64 reference).
TEST(LinearCrossEntropy, ResultsDoNotDependOnChunkSizes) {
  uint64_t seed = test_seed();
  for (DType dtype : {DType::f32, DType::bf16}) {
    Buffers probe = make_buffers(23, 19, 157, dtype, seed, 0.3);
    for (const auto* impl : linear_cross_entropy_op().usable_impls(probe.args)) {
      Buffers whole = make_buffers(23, 19, 157, dtype, seed, 0.3);
      whole.args.softcap = 2.0f;
      whole.args.z_loss = 0.01f;
      ConfigParams one_chunk = config_to_params(LinearCrossEntropyCpuConfig{1000, 1000});
      linear_cross_entropy(whole.args, Dispatch{impl->name, &one_chunk});
      for (LinearCrossEntropyCpuConfig config :
           {LinearCrossEntropyCpuConfig{1, 1}, {3, 7}, {5, 64}, {22, 156}, {8, 1000}}) {
        Buffers chunked = make_buffers(23, 19, 157, dtype, seed, 0.3);
        chunked.args.softcap = 2.0f;
        chunked.args.z_loss = 0.01f;
        ConfigParams params = config_to_params(config);
        linear_cross_entropy(chunked.args, Dispatch{impl->name, &params});
        std::string context =
            str_cat(impl->name, " ", dtype_name(dtype), " config=", params.to_string(), " seed=", seed);
        EXPECT_LE(max_abs_difference(chunked.loss, whole.loss), 2e-6) << context;
        EXPECT_LE(max_abs_difference(chunked.lse, whole.lse), 2e-6) << context;
        EXPECT_LE(max_abs_difference(chunked.dhidden, whole.dhidden), 1e-7) << context;
        EXPECT_LE(max_abs_difference(chunked.dweight, whole.dweight), 1e-7) << context;
      }
    }
  }
}

// The amx path (dlogits as three bf16 terms, every product a bf16 GEMM) with each matmul on the
// tile emulation (core/amx_tiles.h): the float64 reference by the tolerance rule, over vocabulary
// chunks that recompute the logits and one that keeps them, with ignored tokens, a soft cap, the
// z-loss and a scale, and one token with gradients near 1 (where two terms' 16 bits fall outside
// the rule for f32 outputs); the same bits for 1, 2 and 3 threads; dispatch never picks the
// emulation.
TEST(LinearCrossEntropy, AmxPathOnTheEmulationMatchesTheReferenceForAnyThreadCount) {
  const uint64_t seed = test_seed();
  const char* shapes[] = {
      "tokens=37,d_model=40,vocab=150,dtype=bf16,ignore_frac=0.2,softcap=2,z_loss=0.01",
      "tokens=20,d_model=70,vocab=97,dtype=bf16,logit_scale=0.5,grad_scale=3,target_dtype=i32",
      "tokens=1,d_model=33,vocab=40,dtype=bf16,grad_scale=4",
  };
  const int saved_threads = num_threads();
  for (const char* shape : shapes) {
    auto problem = find_op("linear_cross_entropy").make_problem(ShapeSpec::parse(shape), seed);
    for (const char* chunks : {"token_chunk=16,vocab_chunk=64", "token_chunk=64,vocab_chunk=4096"}) {
      const ConfigParams config = ConfigParams::parse(chunks);
      set_num_threads(1);
      const CheckResult result = problem->check("amx_emulated", &config);

      EXPECT_TRUE(result.passed) << shape << " " << chunks << " seed=" << seed << "\n" << result.summary();
      std::vector<std::vector<double>> serial;
      for (const auto& output : problem->outputs()) serial.push_back(to_vector<double>(output.second));
      for (int threads : {2, 3}) {
        set_num_threads(threads);
        problem->run("amx_emulated", &config);
        std::vector<std::vector<double>> parallel;
        for (const auto& output : problem->outputs()) parallel.push_back(to_vector<double>(output.second));
        EXPECT_EQ(parallel, serial) << shape << " " << chunks << " threads=" << threads << " seed=" << seed;
      }
    }
  }
  set_num_threads(saved_threads);
  Buffers b = make_buffers(8, 16, 40, DType::bf16, seed, 0.0);
  EXPECT_EQ(linear_cross_entropy_op().select_impl(b.args).name.find("amx_emulated"), std::string::npos);
}

// dlogits_dtype bf16: each implementation's gradients are the products of dlogits rounded to
// bf16 (worked out here in double from the inputs: softmax - onehot over the valid count, each
// value rounded once), not of the exact dlogits: the distance to the rounded products is a small
// fraction of the distance between the rounded and the exact ones. The loss and lse are the bits
// of the same implementation with f32 dlogits (the rounding is in the backward only).
TEST(LinearCrossEntropy, Bf16DlogitsGradientsAreProductsOfTheRoundedDlogits) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 29, d_model = 24, vocab = 211;
  Buffers probe = make_buffers(tokens, d_model, vocab, DType::bf16, seed, 0.2);
  probe.args.dlogits_dtype = DType::bf16;
  const std::vector<double> hidden = to_vector<double>(probe.hidden), weight = to_vector<double>(probe.weight);
  int64_t valid = 0;
  for (int64_t t = 0; t < tokens; ++t) valid += read_element(probe.targets, t) != -100;
  std::vector<double> exact_dh(tokens * d_model, 0.0), rounded_dh(tokens * d_model, 0.0);
  std::vector<double> exact_dw(vocab * d_model, 0.0), rounded_dw(vocab * d_model, 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t target = static_cast<int64_t>(read_element(probe.targets, t));
    if (target == -100) continue;
    std::vector<double> logits(vocab);
    double max_logit = -INFINITY, sum = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      logits[v] = 0;
      for (int64_t d = 0; d < d_model; ++d) logits[v] += hidden[t * d_model + d] * weight[v * d_model + d];
      max_logit = std::max(max_logit, logits[v]);
    }
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(logits[v] - max_logit);
    for (int64_t v = 0; v < vocab; ++v) {
      const double exact = (std::exp(logits[v] - max_logit) / sum - (v == target)) / valid;
      const double rounded = round_to_bf16(static_cast<float>(exact));
      for (int64_t d = 0; d < d_model; ++d) {
        exact_dh[t * d_model + d] += exact * weight[v * d_model + d];
        rounded_dh[t * d_model + d] += rounded * weight[v * d_model + d];
        exact_dw[v * d_model + d] += exact * hidden[t * d_model + d];
        rounded_dw[v * d_model + d] += rounded * hidden[t * d_model + d];
      }
    }
  }
  auto distance = [](const std::vector<double>& a, const std::vector<double>& b) {
    double squares = 0;
    for (size_t i = 0; i < a.size(); ++i) squares += (a[i] - b[i]) * (a[i] - b[i]);
    return std::sqrt(squares);
  };
  const double rounding_dh = distance(rounded_dh, exact_dh), rounding_dw = distance(rounded_dw, exact_dw);
  ASSERT_GT(rounding_dh, 0.0);
  ASSERT_GT(rounding_dw, 0.0);
  for (const auto* impl : linear_cross_entropy_op().usable_impls(probe.args)) {
    for (LinearCrossEntropyCpuConfig config : {LinearCrossEntropyCpuConfig{7, 64}, {64, 4096}}) {
      const ConfigParams params = config_to_params(config);
      const std::string context = str_cat(impl->name, " config=", params.to_string(), " seed=", seed);
      Buffers rounded = make_buffers(tokens, d_model, vocab, DType::bf16, seed, 0.2);
      rounded.args.dlogits_dtype = DType::bf16;
      linear_cross_entropy(rounded.args, Dispatch{impl->name, &params});
      EXPECT_LE(distance(to_vector<double>(rounded.dhidden), rounded_dh), 0.05 * rounding_dh) << context;
      EXPECT_LE(distance(to_vector<double>(rounded.dweight), rounded_dw), 0.05 * rounding_dw) << context;
      Buffers f32 = make_buffers(tokens, d_model, vocab, DType::bf16, seed, 0.2);
      linear_cross_entropy(f32.args, Dispatch{impl->name, &params});
      EXPECT_EQ(to_vector<double>(rounded.loss), to_vector<double>(f32.loss)) << context;
      EXPECT_EQ(to_vector<double>(rounded.lse), to_vector<double>(f32.lse)) << context;
    }
  }
}

// With weight = 0 every logit is 0: lse = log(vocab), loss = log(vocab) + z (log vocab)^2, and
// dweight[v] = mean over valid tokens of (1/vocab - onehot) * hidden (1 + 2 z log vocab on the 1/vocab part).
TEST(LinearCrossEntropy, UniformLogitsGiveLogVocab) {
  uint64_t seed = test_seed();
  const int64_t tokens = 13, d_model = 7, vocab = 41;
  Buffers b = make_buffers(tokens, d_model, vocab, DType::f32, seed, 0.3);
  write_element(b.targets, 0, 5);
  fill_value(b.weight, 0.0);
  b.args.z_loss = 0.05f;
  linear_cross_entropy(b.args);
  const double log_vocab = std::log(static_cast<double>(vocab)), z = 0.05f;
  EXPECT_NEAR(read_element(b.loss, 0), log_vocab + z * log_vocab * log_vocab, 1e-5) << "seed=" << seed;
  std::vector<double> expected(vocab * d_model, 0.0);
  int64_t valid = 0;
  for (int64_t t = 0; t < tokens; ++t) valid += read_element(b.targets, t) != -100;
  for (int64_t t = 0; t < tokens; ++t) {
    EXPECT_NEAR(read_element(b.lse, t), log_vocab, 1e-5);
    int64_t target = static_cast<int64_t>(read_element(b.targets, t));
    if (target == -100) continue;
    for (int64_t v = 0; v < vocab; ++v)
      for (int64_t d = 0; d < d_model; ++d)
        expected[v * d_model + d] +=
            ((1.0 + 2 * z * log_vocab) / vocab - (v == target)) * read_element(b.hidden, t * d_model + d) / valid;
  }
  for (int64_t i = 0; i < vocab * d_model; ++i)
    EXPECT_NEAR(read_element(b.dweight, i), expected[i], 1e-6) << "dweight[" << i << "] seed=" << seed;
}

// softmax - onehot sums to zero over the vocabulary, so without z-loss sum_v dweight[v] = 0.
TEST(LinearCrossEntropy, WeightGradientSumsToZeroOverVocab) {
  uint64_t seed = test_seed();
  Buffers b = make_buffers(29, 12, 211, DType::f32, seed, 0.2);
  b.args.softcap = 0.0f;
  linear_cross_entropy(b.args);
  for (int64_t d = 0; d < 12; ++d) {
    double sum = 0, magnitude = 0;
    for (int64_t v = 0; v < 211; ++v) {
      sum += read_element(b.dweight, v * 12 + d);
      magnitude += std::fabs(read_element(b.dweight, v * 12 + d));
    }
    EXPECT_LE(std::fabs(sum), 1e-5 * magnitude + 1e-9) << "column " << d << " seed=" << seed;
  }
}

TEST(LinearCrossEntropy, AllIgnoredGivesZeroLossAndGradients) {
  uint64_t seed = test_seed();
  for (DType dtype : {DType::f32, DType::bf16}) {
    Buffers b = make_buffers(9, 10, 50, dtype, seed, 1.0);
    b.args.z_loss = 0.1f;
    linear_cross_entropy(b.args);
    EXPECT_EQ(read_element(b.loss, 0), 0.0) << "seed=" << seed;
    for (int64_t i = 0; i < b.dhidden.numel(); ++i) ASSERT_EQ(read_element(b.dhidden, i), 0.0) << i;
    for (int64_t i = 0; i < b.dweight.numel(); ++i) ASSERT_EQ(read_element(b.dweight, i), 0.0) << i;
    // lse is still computed for ignored tokens.
    Tensor expected_lse = Tensor::empty({9}, DType::f64), loss = Tensor::empty({1}, DType::f64);
    Tensor dhidden = Tensor::empty({9, 10}, DType::f64), dweight = Tensor::empty({50, 10}, DType::f64);
    LinearCrossEntropyArgs reference = b.args;
    reference.lse = expected_lse;
    reference.loss = loss;
    reference.dhidden = dhidden;
    reference.dweight = dweight;
    linear_cross_entropy_reference<double>(reference);
    EXPECT_LE(max_abs_difference(b.lse, expected_lse), 1e-5) << "seed=" << seed;
  }
}

TEST(LinearCrossEntropy, ValidationNamesTheBadArgument) {
  Buffers b = make_buffers(6, 4, 10, DType::f32, 1, 0.0);
  write_element(b.targets, 3, 10);  // == vocab: out of range
  try {
    linear_cross_entropy(b.args);
    FAIL() << "expected lathe::Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("targets[3]"), std::string::npos) << error.what();
  }
  write_element(b.targets, 3, -1);  // negative and not ignore_index
  EXPECT_THROW(linear_cross_entropy(b.args), Error);
  write_element(b.targets, 3, -100);
  EXPECT_NO_THROW(linear_cross_entropy(b.args));
  LinearCrossEntropyArgs wrong_weight = b.args;
  Tensor narrow = Tensor::empty({10, 5}, DType::f32);
  wrong_weight.weight = narrow;
  EXPECT_THROW(linear_cross_entropy(wrong_weight), Error);
  LinearCrossEntropyArgs wrong_dweight = b.args;
  Tensor bf16_dweight = Tensor::empty({10, 4}, DType::bf16);
  wrong_dweight.dweight = bf16_dweight;
  EXPECT_THROW(linear_cross_entropy(wrong_dweight), Error);
  LinearCrossEntropyArgs negative_softcap = b.args;
  negative_softcap.softcap = -1;
  EXPECT_THROW(linear_cross_entropy(negative_softcap), Error);
  LinearCrossEntropyArgs bf16_dlogits_of_f32 = b.args;  // bf16 dlogits need bf16 inputs
  bf16_dlogits_of_f32.dlogits_dtype = DType::bf16;
  try {
    linear_cross_entropy(bf16_dlogits_of_f32);
    FAIL() << "expected lathe::Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("dlogits_dtype"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace lathe
