// MoE router-loss specifics: the float64 reference backwards against central finite differences,
// hand-computed examples of both losses and of the bias update (a tie at the mean included), the
// load-balancing loss of uniform routing (= top_k), numerical stability of the z-loss, bitwise
// equality across thread counts, and validation errors.
#include "lathe/ops/moe_losses/moe_losses.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "finite_difference.h"
#include "lathe/core/parallel.h"
#include "lathe/core/rng.h"
#include "tensor_values.h"
#include "test_seed.h"

namespace lathe {
namespace {

Tensor ids_tensor(int64_t tokens, int64_t top_k, const std::vector<int32_t>& values) {
  return i32_tensor({tokens, top_k}, values);
}

Tensor random_ids(int64_t tokens, int64_t top_k, int64_t experts, uint64_t seed) {
  Tensor ids = Tensor::empty({tokens, top_k}, DType::i32);
  fill_uniform(ids, seed, 0, static_cast<double>(experts), 7);
  return ids;
}

// Round-robin ids (t * top_k + k) % experts: every expert receives tokens * top_k / experts.
Tensor round_robin_ids(int64_t tokens, int64_t top_k, int64_t experts) {
  std::vector<int32_t> values(tokens * top_k);
  for (int64_t i = 0; i < tokens * top_k; ++i) values[i] = static_cast<int32_t>(i % experts);
  return ids_tensor(tokens, top_k, values);
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "<no error>";
}

TEST(MoeLossesTest, LoadBalancingReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 6, experts = 5, top_k = 2;
  Tensor probs = Tensor::empty({tokens, experts}, DType::f64);
  fill_uniform(probs, seed, 0, 1, 1);
  Tensor ids = random_ids(tokens, top_k, experts, seed);
  for (float d_loss : {1.0f, 0.3f}) {
    auto loss = [&] {
      Tensor out = Tensor::empty({1}, DType::f64);
      moe_load_balancing_loss_reference<double>({probs, ids, out});
      return d_loss * out.ptr<double>()[0];
    };
    Tensor d_probs = Tensor::empty({tokens, experts}, DType::f64);
    moe_load_balancing_loss_backward_reference<double>({ids, d_loss, d_probs});
    expect_gradient_matches_finite_differences(probs, d_probs, loss, "d_probs", seed);
  }
}

TEST(MoeLossesTest, ZLossReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 4, experts = 7;
  Tensor logits = Tensor::empty({tokens, experts}, DType::f64);
  fill_uniform(logits, seed, -3, 3, 2);
  for (float d_loss : {1.0f, 0.3f}) {
    auto loss = [&] {
      Tensor out = Tensor::empty({1}, DType::f64);
      moe_z_loss_reference<double>({logits, out});
      return d_loss * out.ptr<double>()[0];
    };
    Tensor d_logits = Tensor::empty({tokens, experts}, DType::f64);
    moe_z_loss_backward_reference<double>({logits, d_loss, d_logits});
    expect_gradient_matches_finite_differences(logits, d_logits, loss, "d_logits", seed);
  }
}

TEST(MoeLossesTest, LoadBalancingLossOfAHandExample) {
  // 4 tokens, 2 experts, top-1; ids = 0, 0, 0, 1, so count = (3, 1).
  // P_0 = (0.9 + 0.8 + 0.6 + 0.3) / 4 = 0.65, P_1 = (0.1 + 0.2 + 0.4 + 0.7) / 4 = 0.35.
  // loss = 2 * (3/4 * 0.65 + 1/4 * 0.35) = 2 * (0.4875 + 0.0875) = 1.15.
  // d_probs[t, e] = d_loss * 2 * count_e / 4^2: (0.375, 0.125) on every row for d_loss = 1.
  Tensor probs = f32_tensor({4, 2}, {0.9f, 0.1f, 0.8f, 0.2f, 0.6f, 0.4f, 0.3f, 0.7f});
  Tensor ids = ids_tensor(4, 1, {0, 0, 0, 1});
  Tensor loss = Tensor::empty({1}, DType::f32), loss64 = Tensor::empty({1}, DType::f64);
  moe_load_balancing_loss({probs, ids, loss});
  moe_load_balancing_loss_reference<double>({probs, ids, loss64});
  EXPECT_NEAR(loss.ptr<float>()[0], 1.15, 1e-6);
  EXPECT_NEAR(loss64.ptr<double>()[0], 1.15, 1e-7);  // the f32 inputs are 0.9 etc. to ~3e-8

  Tensor d_probs = Tensor::empty({4, 2}, DType::f32);
  poison(d_probs);
  moe_load_balancing_loss_backward({ids, 1.0f, d_probs});
  for (int64_t t = 0; t < 4; ++t) {
    EXPECT_EQ(d_probs.ptr<float>()[2 * t], 0.375f) << "token " << t;
    EXPECT_EQ(d_probs.ptr<float>()[2 * t + 1], 0.125f) << "token " << t;
  }
  // accumulate adds to what is there: 1 + 0.5 * (0.375, 0.125).
  fill_value(d_probs, 1.0);
  moe_load_balancing_loss_backward({ids, 0.5f, d_probs, /*accumulate=*/true});
  for (int64_t t = 0; t < 4; ++t) {
    EXPECT_EQ(d_probs.ptr<float>()[2 * t], 1.1875f) << "token " << t;
    EXPECT_EQ(d_probs.ptr<float>()[2 * t + 1], 1.0625f) << "token " << t;
  }
}

TEST(MoeLossesTest, ZLossOfAHandExample) {
  // Row 0 = (0, 0): lse = ln 2, softmax (1/2, 1/2). Row 1 = (ln 3, 0): lse = ln(3 + 1) = 2 ln 2,
  // softmax (3/4, 1/4). loss = ((ln 2)^2 + (2 ln 2)^2) / 2 = 2.5 (ln 2)^2.
  // d_logits = d_loss * 2 * lse_t * softmax / 2 tokens (d_loss = 1):
  //   row 0: ln 2 * 1/2 = (ln 2 / 2, ln 2 / 2); row 1: 2 ln 2 * (3/4, 1/4) = (1.5 ln 2, 0.5 ln 2).
  const double ln2 = std::log(2.0);
  Tensor logits = f32_tensor({2, 2}, {0.0f, 0.0f, static_cast<float>(std::log(3.0)), 0.0f});
  Tensor loss = Tensor::empty({1}, DType::f32);
  moe_z_loss({logits, loss});
  EXPECT_NEAR(loss.ptr<float>()[0], 2.5 * ln2 * ln2, 1e-6);

  Tensor d_logits = Tensor::empty({2, 2}, DType::f32);
  poison(d_logits);
  moe_z_loss_backward({logits, 1.0f, d_logits});
  const double expected[] = {ln2 / 2, ln2 / 2, 1.5 * ln2, 0.5 * ln2};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(d_logits.ptr<float>()[i], expected[i], 1e-6) << "element " << i;
  // accumulate: 0.25 + 2 * expected.
  fill_value(d_logits, 0.25);
  moe_z_loss_backward({logits, 2.0f, d_logits, /*accumulate=*/true});
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(d_logits.ptr<float>()[i], 0.25 + 2 * expected[i], 2e-6) << "element " << i;
}

TEST(MoeLossesTest, UniformRoutingGivesLoadBalancingLossTopK) {
  // count_e = tokens * top_k / E and P_e = 1/E give loss = E * E * (top_k / E) * (1 / E) = top_k.
  // For E a power of two every term is exact in binary, so the f32 result is exactly top_k.
  // With uniform counts but any probabilities whose rows sum to 1, loss = top_k * sum_e P_e = top_k.
  const uint64_t seed = test_seed();
  struct Case {
    int64_t experts, top_k;
  };
  for (Case c : {Case{8, 2}, Case{64, 8}, Case{128, 8}, Case{256, 8}, Case{6, 3}}) {
    const int64_t tokens = 4 * c.experts;
    Tensor ids = round_robin_ids(tokens, c.top_k, c.experts);
    Tensor probs = Tensor::empty({tokens, c.experts}, DType::f32);
    fill_value(probs, 1.0 / static_cast<double>(c.experts));
    Tensor loss = Tensor::empty({1}, DType::f32);
    moe_load_balancing_loss({probs, ids, loss});
    const bool power_of_two = (c.experts & (c.experts - 1)) == 0;
    if (power_of_two)
      EXPECT_EQ(loss.ptr<float>()[0], static_cast<float>(c.top_k)) << "experts=" << c.experts;
    else
      EXPECT_NEAR(loss.ptr<float>()[0], c.top_k, 1e-6 * c.top_k) << "experts=" << c.experts;

    // Random softmax rows: normalise uniform positive values row by row.
    std::vector<double> values(tokens * c.experts);
    Tensor raw = Tensor::empty({tokens, c.experts}, DType::f64);
    fill_uniform(raw, seed, 0.01, 1, 3);
    for (int64_t t = 0; t < tokens; ++t) {
      double sum = 0;
      for (int64_t e = 0; e < c.experts; ++e) sum += raw.ptr<double>()[t * c.experts + e];
      for (int64_t e = 0; e < c.experts; ++e) values[t * c.experts + e] = raw.ptr<double>()[t * c.experts + e] / sum;
    }
    write_from_vector(probs, values);
    moe_load_balancing_loss({probs, ids, loss});
    EXPECT_NEAR(loss.ptr<float>()[0], c.top_k, 2e-6 * c.top_k) << "experts=" << c.experts << " seed=" << seed;
  }
}

TEST(MoeLossesTest, BiasUpdateFollowsTheSignRuleWithTiesAtTheMean) {
  {
    // 8 tokens, top-1, 4 experts: mean_count = 8 * 1 / 4 = 2. ids give counts (3, 2, 1, 2):
    // expert 0 is overloaded (-rate), experts 1 and 3 sit exactly at the mean (sign(0) = 0,
    // unchanged), expert 2 is underloaded (+rate). rate = 0.125:
    // bias (0.5, -0.25, 0, 1) -> (0.375, -0.25, 0.125, 1).
    Tensor ids = ids_tensor(8, 1, {0, 0, 0, 1, 1, 2, 3, 3});
    Tensor bias = f32_tensor({4}, {0.5f, -0.25f, 0.0f, 1.0f});
    Tensor counts = Tensor::empty({4}, DType::i64);
    moe_bias_update({ids, bias, counts, 0.125f});
    const int64_t expected_counts[] = {3, 2, 1, 2};
    const float expected_bias[] = {0.375f, -0.25f, 0.125f, 1.0f};
    for (int e = 0; e < 4; ++e) {
      EXPECT_EQ(counts.ptr<int64_t>()[e], expected_counts[e]) << "expert " << e;
      EXPECT_EQ(bias.ptr<float>()[e], expected_bias[e]) << "expert " << e;
    }
  }
  {
    // 2 tokens, top-2, 3 experts: mean_count = 4/3, not an integer. ids (0, 1), (0, 2) give
    // counts (2, 1, 1): signs (-1, +1, +1); rate 0.5 from bias 0: (-0.5, 0.5, 0.5).
    Tensor ids = ids_tensor(2, 2, {0, 1, 0, 2});
    Tensor bias = f32_tensor({3}, {0.0f, 0.0f, 0.0f});
    Tensor counts = Tensor::empty({3}, DType::i64);
    moe_bias_update({ids, bias, counts, 0.5f});
    const int64_t expected_counts[] = {2, 1, 1};
    const float expected_bias[] = {-0.5f, 0.5f, 0.5f};
    for (int e = 0; e < 3; ++e) {
      EXPECT_EQ(counts.ptr<int64_t>()[e], expected_counts[e]) << "expert " << e;
      EXPECT_EQ(bias.ptr<float>()[e], expected_bias[e]) << "expert " << e;
    }
  }
}

TEST(MoeLossesTest, ZeroTokensGiveZeroLosses) {
  Tensor probs = Tensor::empty({0, 8}, DType::f32), ids = Tensor::empty({0, 2}, DType::i32);
  Tensor loss = Tensor::empty({1}, DType::f32);
  poison(loss);
  moe_load_balancing_loss({probs, ids, loss});
  EXPECT_EQ(loss.ptr<float>()[0], 0.0f);
  poison(loss);
  moe_z_loss({probs, loss});
  EXPECT_EQ(loss.ptr<float>()[0], 0.0f);
}

TEST(MoeLossesTest, ZLossIsStableForLargeLogits) {
  // lse of (1000, 1000) is 1000 + ln 2, far past where exp overflows float.
  Tensor logits = f32_tensor({1, 2}, {1000.0f, 1000.0f});
  Tensor loss = Tensor::empty({1}, DType::f32);
  moe_z_loss({logits, loss});
  const double lse = 1000 + std::log(2.0);
  EXPECT_NEAR(loss.ptr<float>()[0], lse * lse, 1e-6 * lse * lse);
  Tensor d_logits = Tensor::empty({1, 2}, DType::f32);
  moe_z_loss_backward({logits, 1.0f, d_logits});
  EXPECT_NEAR(d_logits.ptr<float>()[0], lse, 1e-6 * lse);  // 2 * lse * 1/2 / 1 token
  EXPECT_NEAR(d_logits.ptr<float>()[1], lse, 1e-6 * lse);
}

TEST(MoeLossesTest, LossesAreBitwiseIdenticalForAnyThreadCount) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 1000, experts = 128, top_k = 8;
  Tensor probs = Tensor::empty({tokens, experts}, DType::f32);
  fill_uniform(probs, seed, 0, 2.0 / experts, 4);
  Tensor logits = Tensor::empty({tokens, experts}, DType::f32);
  fill_uniform(logits, seed, -4, 4, 5);
  Tensor ids = random_ids(tokens, top_k, experts, seed);
  const int original_threads = num_threads();
  for (int64_t chunk : {16, 256}) {  // 63 chunks and 4 chunks of tokens
    ConfigParams config;
    config.set("tokens_per_chunk", chunk);
    std::map<std::string, std::pair<uint32_t, uint32_t>> one_thread;  // impl -> bits of both losses
    for (int threads : {1, 2, 3, 7}) {
      set_num_threads(threads);
      for (const char* impl : {"scalar", "avx2", "avx512"}) {
        if ((std::string(impl) == "avx2" && !isa_available(Isa::avx2)) ||
            (std::string(impl) == "avx512" && !isa_available(Isa::avx512)))
          continue;
        Dispatch dispatch;
        dispatch.impl = impl;
        dispatch.config = &config;
        Tensor balance = Tensor::empty({1}, DType::f32), z = Tensor::empty({1}, DType::f32);
        moe_load_balancing_loss({probs, ids, balance}, dispatch);
        moe_z_loss({logits, z}, dispatch);
        std::pair<uint32_t, uint32_t> bits;
        std::memcpy(&bits.first, balance.ptr<float>(), 4);
        std::memcpy(&bits.second, z.ptr<float>(), 4);
        if (threads == 1) {
          one_thread[impl] = bits;
          continue;
        }
        EXPECT_EQ(bits.first, one_thread[impl].first)
            << "load balancing, " << impl << " threads=" << threads << " chunk=" << chunk << " seed=" << seed;
        EXPECT_EQ(bits.second, one_thread[impl].second)
            << "z-loss, " << impl << " threads=" << threads << " chunk=" << chunk << " seed=" << seed;
      }
    }
  }
  set_num_threads(original_threads);
}

TEST(MoeLossesTest, ValidationNamesTheArgumentAndThePosition) {
  Tensor probs = Tensor::empty({3, 8}, DType::f32), loss = Tensor::empty({1}, DType::f32);
  fill_value(probs, 0.125);
  Tensor bad_ids = ids_tensor(3, 2, {0, 1, 2, 3, 4, 8});
  EXPECT_NE(error_of([&] {
              moe_load_balancing_loss({probs, bad_ids, loss});
            }).find("moe_load_balancing_loss: expert_ids[2, 1] = 8 is out of range [0, 8)"),
            std::string::npos);
  Tensor negative_ids = ids_tensor(3, 2, {0, 1, -1, 3, 4, 5});
  EXPECT_NE(error_of([&] {
              moe_load_balancing_loss({probs, negative_ids, loss});
            }).find("expert_ids[1, 0] = -1 is out of range [0, 8)"),
            std::string::npos);
  Tensor ids = ids_tensor(3, 2, {0, 1, 2, 3, 4, 5});
  Tensor ids64 = Tensor::empty({3, 2}, DType::i64), short_ids = ids_tensor(2, 2, {0, 1, 2, 3});
  fill_value(ids64, 1);
  EXPECT_NE(error_of([&] {
              moe_load_balancing_loss({probs, ids64, loss});
            }).find("moe_load_balancing_loss: expert_ids has dtype i64, expected i32"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              moe_load_balancing_loss({probs, short_ids, loss});
            }).find("expert_ids has shape (2, 2)"),
            std::string::npos);
  Tensor loss2 = Tensor::empty({2}, DType::f32), probs64 = Tensor::empty({3, 8}, DType::f64);
  EXPECT_NE(error_of([&] {
              moe_load_balancing_loss({probs, ids, loss2});
            }).find("loss has shape (2), expected (1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              moe_load_balancing_loss({probs64, ids, loss});
            }).find("probs has dtype f64"),
            std::string::npos);

  Tensor d_probs = Tensor::empty({3, 8}, DType::f32);
  EXPECT_NE(error_of([&] {
              moe_load_balancing_loss_backward({bad_ids, 1.0f, d_probs});
            }).find("moe_load_balancing_loss_backward: expert_ids[2, 1] = 8"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              moe_load_balancing_loss_backward({ids, NAN, d_probs});
            }).find("d_loss must be finite"),
            std::string::npos);

  Tensor no_experts = Tensor::empty({3, 0}, DType::f32), d_logits_short = Tensor::empty({3, 7}, DType::f32);
  EXPECT_NE(error_of([&] {
              moe_z_loss({no_experts, loss});
            }).find("moe_z_loss: experts must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              moe_z_loss_backward({probs, 1.0f, d_logits_short});
            }).find("moe_z_loss_backward: d_logits has shape (3, 7), expected (3, 8)"),
            std::string::npos);

  Tensor bias = Tensor::empty({8}, DType::f32), counts = Tensor::empty({8}, DType::i64);
  Tensor counts32 = Tensor::empty({8}, DType::i32), counts7 = Tensor::empty({7}, DType::i64);
  EXPECT_NE(error_of([&] {
              moe_bias_update({bad_ids, bias, counts});
            }).find("moe_bias_update: expert_ids[2, 1] = 8 is out of range [0, 8)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              moe_bias_update({ids, bias, counts32});
            }).find("counts has dtype i32, expected i64"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              moe_bias_update({ids, bias, counts7});
            }).find("counts has shape (7), expected (8)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              moe_bias_update({ids, bias, counts, -1e-3f});
            }).find("rate must be finite and >= 0"),
            std::string::npos);
}

}  // namespace
}  // namespace lathe
