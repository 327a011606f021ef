#include "lathe/models/hf/logit_comparison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe {
namespace {

Tensor make_logits(int64_t positions, int64_t vocab, uint64_t seed) {
  Tensor logits = Tensor::empty({positions, vocab}, DType::f32);
  fill_uniform(logits, seed, -3.0, 3.0);
  return logits;
}

TEST(LogitComparison, TwoTokenKlMatchesClosedForm) {
  // p = softmax(0, 0) = (1/2, 1/2); q = softmax(0, ln 3) = (1/4, 3/4).
  Tensor reference = Tensor::zeros({1, 2}, DType::f64);
  Tensor candidate = Tensor::zeros({1, 2}, DType::f64);
  candidate.ptr<double>()[1] = std::log(3.0);
  const LogitComparison result = compare_logits(reference, candidate);
  EXPECT_NEAR(result.mean_kl(), 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), 1e-15);
  EXPECT_DOUBLE_EQ(result.max_abs_diff, std::log(3.0));
  EXPECT_EQ(result.top1_matches, 0);  // reference tie breaks to token 0, candidate prefers token 1
  EXPECT_DOUBLE_EQ(result.logit_scale, 0.0);
}

TEST(LogitComparison, ShiftedLogitsGiveTheSameDistribution) {
  const uint64_t seed = test_seed();
  Tensor reference = make_logits(5, 37, seed);
  Tensor candidate = make_logits(5, 37, seed);
  for (int64_t i = 0; i < candidate.numel(); ++i) candidate.ptr<float>()[i] += 0.5f;  // softmax ignores it
  const LogitComparison result = compare_logits(reference, candidate);
  EXPECT_EQ(result.positions, 5) << "seed " << seed;
  EXPECT_EQ(result.top1_matches, 5) << "seed " << seed;
  EXPECT_NEAR(result.max_abs_diff, 0.5, 1e-6) << "seed " << seed;
  EXPECT_LT(result.mean_kl(), 1e-12) << "seed " << seed;
  EXPECT_LE(result.logit_scale, 3.0) << "seed " << seed;
  EXPECT_GT(result.logit_scale, 2.0) << "seed " << seed;
}

TEST(LogitComparison, DifferentLogitsDisagreeAndMergeAccumulates) {
  const uint64_t seed = test_seed();
  Tensor reference = make_logits(4, 50, seed);
  Tensor candidate = make_logits(4, 50, seed + 1);
  const LogitComparison first = compare_logits(reference, candidate);
  EXPECT_GT(first.mean_kl(), 0.1) << "seed " << seed;  // independent uniform(-3, 3) logits
  const LogitComparison second = compare_logits(reference, reference);
  EXPECT_EQ(second.max_abs_diff, 0.0);
  EXPECT_EQ(second.top1_matches, 4);
  LogitComparison total = first;
  total.merge(second);
  EXPECT_EQ(total.positions, 8);
  EXPECT_EQ(total.top1_matches, first.top1_matches + 4);
  EXPECT_DOUBLE_EQ(total.mean_kl(), first.kl_sum / 8.0);
  EXPECT_EQ(total.max_abs_diff, first.max_abs_diff);
}

TEST(LogitComparison, RejectsMismatchedShapesAndNonFiniteLogits) {
  Tensor reference = make_logits(3, 10, 1);
  Tensor wrong_vocab = make_logits(3, 11, 1);
  EXPECT_THROW(compare_logits(reference, wrong_vocab), Error);
  Tensor candidate = make_logits(3, 10, 1);
  candidate.ptr<float>()[13] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(compare_logits(reference, candidate), Error);
}

}  // namespace
}  // namespace lathe
