// gated_group_rms_norm on the tape: the f32 path (the gated_rms_norm op's kernels) against the f64
// path (its float64 reference), forward and every gradient; the f64 path's gradients against
// central finite differences; the f32 path's results do not depend on the thread count.
#include "lathe/autograd/mamba2_ops.h"

#include <gtest/gtest.h>

#include <vector>

#include "finite_difference.h"
#include "sequence_test_util.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

struct NormInputs {
  Tensor y, z, weight, probe;  // y, z, probe: (rows, width); weight: (width)
};

NormInputs random_inputs(int64_t rows, int64_t width, uint64_t seed) {
  return {random_tensor_for_test({rows, width}, DType::f64, seed, 1, -2, 2),
          random_tensor_for_test({rows, width}, DType::f64, seed, 2, -3, 3),
          random_tensor_for_test({width}, DType::f64, seed, 3, 0.5, 1.5),
          random_tensor_for_test({rows, width}, DType::f64, seed, 4, -1, 1)};
}

struct NormResult {
  Tensor out, dy, dz, dweight;
};

NormResult run_norm(Precision precision, const NormInputs& in, int64_t groups) {
  const DType dtype = precision == Precision::fast ? DType::f32 : DType::f64;
  Tape tape(precision);
  Var y = make_var(convert(in.y, dtype), true), z = make_var(convert(in.z, dtype), true);
  Var weight = make_var(convert(in.weight, dtype), true);
  Var out = gated_group_rms_norm(tape, y, z, weight, groups, 1e-5);
  tape.backward(out, convert(in.probe, dtype));
  return {out->value, y->grad, z->grad, weight->grad};
}

// Awkward shapes: one row, widths not a multiple of the vector width, rows beyond one dweight block.
const struct { int64_t rows, width, groups; } kShapes[] = {{1, 7, 1}, {37, 26, 2}, {130, 48, 1}, {70, 3 * 11, 3}};

TEST(GatedGroupRmsNorm, FastPathMatchesTheFloat64Path) {
  const uint64_t seed = test_seed();
  for (const auto& shape : kShapes) {
    const NormInputs in = random_inputs(shape.rows, shape.width, seed);
    const NormResult fast = run_norm(Precision::fast, in, shape.groups);
    const NormResult reference = run_norm(Precision::reference_f64, in, shape.groups);
    const std::string where = " rows=" + std::to_string(shape.rows) + " width=" + std::to_string(shape.width) +
                              " groups=" + std::to_string(shape.groups) + " seed=" + std::to_string(seed);
    EXPECT_LE(relative_norm_difference(fast.out, reference.out), 1e-5) << "out" << where;
    EXPECT_LE(relative_norm_difference(fast.dy, reference.dy), 1e-5) << "dy" << where;
    EXPECT_LE(relative_norm_difference(fast.dz, reference.dz), 1e-5) << "dz" << where;
    EXPECT_LE(relative_norm_difference(fast.dweight, reference.dweight), 1e-5) << "dweight" << where;
  }
}

TEST(GatedGroupRmsNorm, Float64GradientsMatchFiniteDifferences) {
  const uint64_t seed = test_seed();
  const int64_t rows = 3, width = 6, groups = 2;
  const NormInputs in = random_inputs(rows, width, seed);
  const NormResult analytic = run_norm(Precision::reference_f64, in, groups);
  auto loss = [&] {
    Tape tape(Precision::reference_f64, false);
    return sum_of_products(
        gated_group_rms_norm(tape, make_var(in.y), make_var(in.z), make_var(in.weight), groups, 1e-5)->value, in.probe);
  };
  expect_gradient_matches_finite_differences(in.y, analytic.dy, loss, "dy", seed);
  expect_gradient_matches_finite_differences(in.z, analytic.dz, loss, "dz", seed);
  expect_gradient_matches_finite_differences(in.weight, analytic.dweight, loss, "dweight", seed);
}

TEST(GatedGroupRmsNorm, FastPathDoesNotDependOnTheThreadCount) {
  const uint64_t seed = test_seed();
  const NormInputs in = random_inputs(200, 40, seed);
  auto run = [&] {
    const NormResult result = run_norm(Precision::fast, in, 2);
    return concatenated({&result.out, &result.dy, &result.dz, &result.dweight});
  };
  const std::vector<double> one = run_with_threads(1, run);
  EXPECT_EQ(run_with_threads(2, run), one) << "seed=" << seed;
  EXPECT_EQ(run_with_threads(3, run), one) << "seed=" << seed;
}

}  // namespace
}  // namespace lathe::autograd
