// Op-specific checks of ssd_scan (the contract tests cover the chunked path against the token
// recurrence, every config, NaN poisoning and determinism): the float64 reference backward
// against central finite differences of the reference forward (groups shared by heads, D skip,
// initial and final state); decode steps updating the state in place and a split sequence with
// the state carried equal the whole sequence; thread-count independence; dA's accuracy on inputs
// where float sums lost it; argument errors.
#include "lathe/ops/ssd_scan/ssd_scan.h"

#include <gtest/gtest.h>

#include "expect_error.h"
#include "finite_difference.h"
#include "lathe/ops/problem.h"
#include "sequence_test_util.h"
#include "test_seed.h"

namespace lathe {
namespace {

struct SsdTensors {
  Tensor x, dt, a, b, c, d, state;
  SsdTensors(int64_t batch, int64_t seq, int64_t heads, int64_t p, int64_t groups, int64_t n, DType dtype,
             uint64_t seed) {
    x = random_tensor_for_test({batch, seq, heads, p}, dtype, seed, 1, -1, 1);
    dt = random_tensor_for_test({batch, seq, heads}, dtype, seed, 2, 0.01, 0.3);
    a = random_tensor_for_test({heads}, dtype, seed, 3, -4, -1);
    b = random_tensor_for_test({batch, seq, groups, n}, dtype, seed, 4, -1, 1);
    c = random_tensor_for_test({batch, seq, groups, n}, dtype, seed, 5, -1, 1);
    d = random_tensor_for_test({heads}, dtype, seed, 6, -1, 1);
    state = random_tensor_for_test({batch, heads, p, n}, dtype, seed, 7, -1, 1);
  }
};

TEST(SsdScan, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  const int64_t batch = 2, seq = 4, heads = 2, p = 2, groups = 1, n = 3;
  SsdTensors in(batch, seq, heads, p, groups, n, DType::f64, seed);
  Tensor probe_y = random_tensor_for_test(in.x.shape(), DType::f64, seed, 8, -1, 1);
  Tensor probe_s = random_tensor_for_test(in.state.shape(), DType::f64, seed, 9, -1, 1);
  auto loss = [&] {
    Tensor y = Tensor::empty(in.x.shape(), DType::f64), s = Tensor::empty(in.state.shape(), DType::f64);
    ssd_scan_reference<double>({in.x, in.dt, in.a, in.b, in.c, in.d, in.state, y, s});
    return sum_of_products(y, probe_y) + sum_of_products(s, probe_s);
  };
  Tensor dx = Tensor::empty(in.x.shape(), DType::f64), ddt = Tensor::empty(in.dt.shape(), DType::f64);
  Tensor da = Tensor::empty(in.a.shape(), DType::f64), db = Tensor::empty(in.b.shape(), DType::f64);
  Tensor dc = Tensor::empty(in.c.shape(), DType::f64), dd = Tensor::empty(in.d.shape(), DType::f64);
  Tensor ds = Tensor::empty(in.state.shape(), DType::f64);
  ssd_scan_backward_reference<double>(
      {in.x, in.dt, in.a, in.b, in.c, in.d, in.state, probe_y, probe_s, dx, ddt, da, db, dc, dd, ds});
  expect_gradient_matches_finite_differences(in.x, dx, loss, "dx", seed);
  expect_gradient_matches_finite_differences(in.dt, ddt, loss, "ddt", seed);
  expect_gradient_matches_finite_differences(in.a, da, loss, "da", seed);
  expect_gradient_matches_finite_differences(in.b, db, loss, "db", seed);
  expect_gradient_matches_finite_differences(in.c, dc, loss, "dc", seed);
  expect_gradient_matches_finite_differences(in.d, dd, loss, "dd", seed);
  expect_gradient_matches_finite_differences(in.state, ds, loss, "d_initial_state", seed);
}

TEST(SsdScan, DecodeStepsAndSplitSequencesEqualTheWholeSequence) {
  const uint64_t seed = test_seed();
  const int64_t batch = 2, seq = 41, heads = 4, p = 9, groups = 2, n = 18;
  SsdTensors in(batch, seq, heads, p, groups, n, DType::f32, seed);
  Tensor y = Tensor::empty(in.x.shape(), DType::f32), final_state = Tensor::empty(in.state.shape(), DType::f32);
  ssd_scan({in.x, in.dt, in.a, in.b, in.c, in.d, in.state, y, final_state});
  for (int64_t split : {int64_t{1}, int64_t{29}}) {
    Tensor cache = copy_tensor(in.state), y_parts = Tensor::empty(y.shape(), DType::f32);
    poison(y_parts);
    for (int64_t t0 = 0; t0 < seq;) {
      const int64_t t1 = split == 1 ? t0 + 1 : (t0 == 0 ? split : seq);
      Tensor part = Tensor::empty({batch, t1 - t0, heads, p}, DType::f32);
      Tensor x = token_range(in.x, t0, t1), dt = token_range(in.dt, t0, t1);
      Tensor b = token_range(in.b, t0, t1), c = token_range(in.c, t0, t1);
      ssd_scan({x, dt, in.a, b, c, in.d, cache, part, cache});
      write_token_range(y_parts, t0, part);
      t0 = t1;
    }
    EXPECT_LE(relative_norm_difference(y_parts, y), 1e-5) << "split=" << split << " seed=" << seed;
    EXPECT_LE(relative_norm_difference(cache, final_state), 1e-5) << "split=" << split << " seed=" << seed;
  }
}

TEST(SsdScan, ResultsDoNotDependOnTheThreadCount) {
  const uint64_t seed = test_seed();
  SsdTensors in(2, 70, 4, 16, 1, 20, DType::f32, seed);
  Tensor dy = random_tensor_for_test(in.x.shape(), DType::f32, seed, 10, -1, 1);
  auto run = [&] {
    Tensor y = Tensor::empty(in.x.shape(), DType::f32), s = Tensor::empty(in.state.shape(), DType::f32);
    Tensor dx = Tensor::empty(in.x.shape(), DType::f32), ddt = Tensor::empty(in.dt.shape(), DType::f32);
    Tensor da = Tensor::empty(in.a.shape(), DType::f32), db = Tensor::empty(in.b.shape(), DType::f32);
    Tensor dc = Tensor::empty(in.c.shape(), DType::f32), dd = Tensor::empty(in.d.shape(), DType::f32);
    Tensor ds = Tensor::empty(in.state.shape(), DType::f32);
    ssd_scan({in.x, in.dt, in.a, in.b, in.c, in.d, in.state, y, s});
    ssd_scan_backward({in.x, in.dt, in.a, in.b, in.c, in.d, in.state, dy, TensorView{}, dx, ddt, da, db, dc, dd, ds});
    return concatenated({&y, &s, &dx, &ddt, &da, &db, &dc, &dd, &ds});
  };
  const std::vector<double> one = run_with_threads(1, run);
  EXPECT_EQ(run_with_threads(3, run), one) << "seed=" << seed;
  EXPECT_EQ(run_with_threads(2, run), one) << "seed=" << seed;
}

// dA sums dt x (reverse cumulative d gamma) over every token, and within a chunk that cumulative
// sum cancels exactly every pair of tokens on the same side of a split: the row and column sums
// of the decayed scores' gradient must be near exact for the cancellation to survive. With float
// (Kahan) sums, these inputs of the contract's largest edge shape put dA at 1.01x (seed 5230,
// avx2: a contract failure), 0.40x (6522, avx2) and 0.39x (6205, avx512) of the tolerance rule's
// allowance; with double sums 0.04-0.19x (the token recurrence of cuda_emulated: 0.04-0.19x), and
// the chunked implementations stayed under 0.25x over 600 further seeds (2026-12-06). Half the
// allowance is the bound here.
TEST(SsdScan, DecayGradientKeepsTheChunkCancellation) {
  const std::string shape = "batch=1,seq=70,heads=2,head_dim=64,groups=1,state=128,final_state=0";
  for (uint64_t seed : {5230, 6522, 6205}) {
    auto problem = find_op("ssd_scan_backward").make_problem(ShapeSpec::parse(shape), seed);
    for (const std::string& impl : problem->impl_names()) {
      const ConfigParams config = problem->heuristic_config(impl);
      const CheckResult result = problem->check(impl, &config);
      EXPECT_TRUE(result.passed) << impl << " seed=" << seed << "\n" << result.summary();
      for (const OutputCheck& output : result.outputs) {
        if (output.name != "da") continue;
        EXPECT_LE(output.max_error, 0.5 * output.allowed) << impl << " seed=" << seed << "\n" << result.summary();
      }
    }
  }
}

TEST(SsdScan, RejectsBadArgumentsNamingOpAndArgument) {
  SsdTensors in(1, 8, 4, 8, 2, 6, DType::f32, 1);
  Tensor y = Tensor::empty(in.x.shape(), DType::f32);
  const SsdScanArgs good{in.x, in.dt, in.a, in.b, in.c, in.d, in.state, y, TensorView{}};
  EXPECT_NO_THROW(ssd_scan(good));
  Tensor b3 = Tensor::zeros({1, 8, 3, 6}, DType::f32);
  SsdScanArgs args = good;
  args.b = b3, args.c = b3;
  expect_error([&] { ssd_scan(args); }, "ssd_scan: x has 4 heads, expected a multiple of the 3 groups");
  Tensor a5 = Tensor::zeros({5}, DType::f32);
  args = good;
  args.a = a5;
  expect_error([&] { ssd_scan(args); }, "ssd_scan: a");
  Tensor c_short = Tensor::zeros({1, 8, 2, 5}, DType::f32);
  args = good;
  args.c = c_short;
  expect_error([&] { ssd_scan(args); }, "ssd_scan: c");
  Tensor bad_state = Tensor::zeros({1, 4, 6, 8}, DType::f32);  // (P, N) swapped
  args = good;
  args.final_state = bad_state;
  expect_error([&] { ssd_scan(args); }, "ssd_scan: final_state");
}

}  // namespace
}  // namespace lathe
