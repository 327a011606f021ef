// Op-specific checks of gated_delta_rule (the contract tests cover the chunked path against the
// token recurrence, every config, NaN poisoning and determinism): the float64 reference backward
// against central finite differences of the reference forward (with and without the in-op L2
// normalisation, GQA heads, initial and final state); decode steps updating the state in place
// and a sequence split in two with the state carried equal the whole sequence; results do not
// change with the thread count; argument errors name the op and the argument.
#include "lathe/ops/gated_delta_rule/gated_delta_rule.h"

#include <gtest/gtest.h>

#include "expect_error.h"
#include "finite_difference.h"
#include "sequence_test_util.h"
#include "test_seed.h"

namespace lathe {
namespace {

struct DeltaTensors {
  Tensor q, k, v, g, beta, state;
  DeltaTensors(int64_t batch, int64_t seq, int64_t hk, int64_t hv, int64_t dk, int64_t dv, DType dtype, uint64_t seed,
               double qk_bound) {
    q = random_tensor_for_test({batch, seq, hk, dk}, dtype, seed, 1, -qk_bound, qk_bound);
    k = random_tensor_for_test({batch, seq, hk, dk}, dtype, seed, 2, -qk_bound, qk_bound);
    v = random_tensor_for_test({batch, seq, hv, dv}, dtype, seed, 3, -1, 1);
    g = random_tensor_for_test({batch, seq, hv}, dtype, seed, 4, -0.5, 0);
    beta = random_tensor_for_test({batch, seq, hv}, dtype, seed, 5, 0.05, 0.95);
    state = random_tensor_for_test({batch, hv, dk, dv}, dtype, seed, 6, -1, 1);
  }
};

TEST(GatedDeltaRule, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  for (bool l2norm : {false, true}) {
    const int64_t batch = 1, seq = 5, hk = 1, hv = 2, dk = 3, dv = 2;
    DeltaTensors in(batch, seq, hk, hv, dk, dv, DType::f64, seed, l2norm ? 1.0 : 0.6);
    Tensor probe_o = random_tensor_for_test({batch, seq, hv, dv}, DType::f64, seed, 7, -1, 1);
    Tensor probe_s = random_tensor_for_test({batch, hv, dk, dv}, DType::f64, seed, 8, -1, 1);
    GatedDeltaRuleOptions options;
    options.l2norm_qk = l2norm;
    options.scale = l2norm ? 0.0f : 0.7f;
    auto loss = [&] {
      Tensor o = Tensor::empty({batch, seq, hv, dv}, DType::f64), s = Tensor::empty({batch, hv, dk, dv}, DType::f64);
      gated_delta_rule_reference<double>({in.q, in.k, in.v, in.g, in.beta, in.state, o, s, options});
      return sum_of_products(o, probe_o) + sum_of_products(s, probe_s);
    };
    Tensor dq = Tensor::empty(in.q.shape(), DType::f64), dk_ = Tensor::empty(in.k.shape(), DType::f64);
    Tensor dv_ = Tensor::empty(in.v.shape(), DType::f64), dg = Tensor::empty(in.g.shape(), DType::f64);
    Tensor dbeta = Tensor::empty(in.beta.shape(), DType::f64), ds = Tensor::empty(in.state.shape(), DType::f64);
    gated_delta_rule_backward_reference<double>(
        {in.q, in.k, in.v, in.g, in.beta, in.state, probe_o, probe_s, dq, dk_, dv_, dg, dbeta, ds, options});
    const std::string what = l2norm ? " (l2norm)" : "";
    expect_gradient_matches_finite_differences(in.q, dq, loss, "dq" + what, seed);
    expect_gradient_matches_finite_differences(in.k, dk_, loss, "dk" + what, seed);
    expect_gradient_matches_finite_differences(in.v, dv_, loss, "dv" + what, seed);
    expect_gradient_matches_finite_differences(in.g, dg, loss, "dg" + what, seed);
    expect_gradient_matches_finite_differences(in.beta, dbeta, loss, "dbeta" + what, seed);
    expect_gradient_matches_finite_differences(in.state, ds, loss, "d_initial_state" + what, seed);
  }
}

// Decoding token by token with the state updated in place (final_state aliasing initial_state),
// and a prefill of 23 tokens followed by the rest, give the outputs and final state of one call
// over the whole sequence (f32 relative-norm rule).
TEST(GatedDeltaRule, DecodeStepsAndSplitSequencesEqualTheWholeSequence) {
  const uint64_t seed = test_seed();
  const int64_t batch = 2, seq = 45, hk = 2, hv = 4, dk = 20, dv = 12;
  DeltaTensors in(batch, seq, hk, hv, dk, dv, DType::f32, seed, 1.0);
  GatedDeltaRuleOptions options;
  options.l2norm_qk = true;
  Tensor o = Tensor::empty({batch, seq, hv, dv}, DType::f32), final_state = Tensor::empty(in.state.shape(), DType::f32);
  poison(o);
  gated_delta_rule({in.q, in.k, in.v, in.g, in.beta, in.state, o, final_state, options});
  for (int64_t split : {int64_t{1}, int64_t{23}}) {
    Tensor cache = copy_tensor(in.state), o_parts = Tensor::empty(o.shape(), DType::f32);
    poison(o_parts);
    for (int64_t t0 = 0; t0 < seq;) {
      const int64_t t1 = split == 1 ? t0 + 1 : (t0 == 0 ? split : seq);
      Tensor part = Tensor::empty({batch, t1 - t0, hv, dv}, DType::f32);
      Tensor q = token_range(in.q, t0, t1), k = token_range(in.k, t0, t1), v = token_range(in.v, t0, t1);
      Tensor g = token_range(in.g, t0, t1), beta = token_range(in.beta, t0, t1);
      gated_delta_rule({q, k, v, g, beta, cache, part, cache, options});
      write_token_range(o_parts, t0, part);
      t0 = t1;
    }
    EXPECT_LE(relative_norm_difference(o_parts, o), 1e-5) << "split=" << split << " seed=" << seed;
    EXPECT_LE(relative_norm_difference(cache, final_state), 1e-5) << "split=" << split << " seed=" << seed;
  }
}

TEST(GatedDeltaRule, ResultsDoNotDependOnTheThreadCount) {
  const uint64_t seed = test_seed();
  const int64_t batch = 2, seq = 77, hk = 2, hv = 4, dk = 16, dv = 24;
  DeltaTensors in(batch, seq, hk, hv, dk, dv, DType::f32, seed, 1.0);
  Tensor d_o = random_tensor_for_test({batch, seq, hv, dv}, DType::f32, seed, 9, -1, 1);
  GatedDeltaRuleOptions options;
  options.l2norm_qk = true;
  auto run = [&] {
    Tensor o = Tensor::empty(d_o.shape(), DType::f32), s = Tensor::empty(in.state.shape(), DType::f32);
    Tensor dq = Tensor::empty(in.q.shape(), DType::f32), dk_ = Tensor::empty(in.k.shape(), DType::f32);
    Tensor dv_ = Tensor::empty(in.v.shape(), DType::f32), dg = Tensor::empty(in.g.shape(), DType::f32);
    Tensor dbeta = Tensor::empty(in.g.shape(), DType::f32), ds = Tensor::empty(in.state.shape(), DType::f32);
    gated_delta_rule({in.q, in.k, in.v, in.g, in.beta, in.state, o, s, options});
    gated_delta_rule_backward(
        {in.q, in.k, in.v, in.g, in.beta, in.state, d_o, TensorView{}, dq, dk_, dv_, dg, dbeta, ds, options});
    return concatenated({&o, &s, &dq, &dk_, &dv_, &dg, &dbeta, &ds});
  };
  const std::vector<double> one = run_with_threads(1, run);
  EXPECT_EQ(run_with_threads(3, run), one) << "seed=" << seed;
  EXPECT_EQ(run_with_threads(2, run), one) << "seed=" << seed;
}

TEST(GatedDeltaRule, RejectsBadArgumentsNamingOpAndArgument) {
  DeltaTensors in(1, 8, 2, 4, 8, 8, DType::f32, 1, 1.0);
  Tensor o = Tensor::empty({1, 8, 4, 8}, DType::f32);
  const GatedDeltaRuleArgs good{in.q, in.k, in.v, in.g, in.beta, in.state, o, TensorView{}, {}};
  EXPECT_NO_THROW(gated_delta_rule(good));
  Tensor v3 = Tensor::zeros({1, 8, 3, 8}, DType::f32), g3 = Tensor::zeros({1, 8, 3}, DType::f32);
  Tensor o3 = Tensor::empty({1, 8, 3, 8}, DType::f32);
  GatedDeltaRuleArgs args = good;
  args.v = v3, args.g = g3, args.beta = g3, args.o = o3;
  expect_error([&] { gated_delta_rule(args); }, "gated_delta_rule: v has 3 heads, expected a multiple of the 2");
  Tensor bad_state = Tensor::zeros({1, 4, 8, 7}, DType::f32);
  args = good;
  args.initial_state = bad_state;
  expect_error([&] { gated_delta_rule(args); }, "gated_delta_rule: initial_state");
  Tensor bf16_k = Tensor::zeros({1, 8, 2, 8}, DType::bf16);
  args = good;
  args.k = bf16_k;
  expect_error([&] { gated_delta_rule(args); }, "gated_delta_rule: k");
  args = good;
  args.options.scale = -1;
  expect_error([&] { gated_delta_rule(args); }, "gated_delta_rule: scale");
  Tensor dq = Tensor::empty(in.q.shape(), DType::f32), dk = Tensor::empty(in.k.shape(), DType::f32);
  Tensor dv = Tensor::empty(in.v.shape(), DType::f32), dg = Tensor::empty(in.g.shape(), DType::f32);
  Tensor dbeta = Tensor::empty(in.g.shape(), DType::f32);
  GatedDeltaRuleBackwardArgs backward{in.q, in.k, in.v, in.g, in.beta, in.state,     o, TensorView{},
                                      dq,   dk,   dv,   dg,   dbeta,   TensorView{}, {}};
  expect_error([&] { gated_delta_rule_backward(backward); }, "gated_delta_rule_backward: d_initial_state");
}

}  // namespace
}  // namespace lathe
