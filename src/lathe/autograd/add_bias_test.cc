// add_bias: forward against plain arithmetic, the f64 backward against finite differences, and
// the f32 path against the f64 one.
#include <gtest/gtest.h>

#include <vector>

#include "autograd_op_checks.h"
#include "lathe/autograd/ops.h"
#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

TEST(AddBias, ForwardAddsTheBiasToEveryRow) {
  const uint64_t seed = test_seed();
  Tensor x = Tensor::empty({5, 3}, DType::f32), bias = Tensor::empty({3}, DType::f32);
  fill_normal(x, seed, 0.0, 1.0, 1);
  fill_normal(bias, seed, 0.0, 1.0, 2);
  Tape tape(Precision::fast, /*recording=*/false);
  Var out = add_bias(tape, make_var(x), make_var(bias));
  for (int64_t row = 0; row < 5; ++row)
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(out->value.ptr<float>()[row * 3 + i], x.ptr<float>()[row * 3 + i] + bias.ptr<float>()[i])
          << "seed " << seed;
}

TEST(AddBias, ReferenceGradientsMatchFiniteDifferences) {
  const uint64_t seed = test_seed();
  check_finite_differences(
      {random({4, 6}, seed, 1), random({6}, seed, 2)}, random({4, 6}, seed, 3),
      [](Tape& tape, const std::vector<Var>& v) { return add_bias(tape, v[0], v[1]); }, seed);
}

TEST(AddBias, FastGradientsMatchReference) {
  const uint64_t seed = test_seed();
  const Shape shape{37, 19};
  Tensor x = Tensor::empty(shape, DType::f32), bias = Tensor::empty({19}, DType::f32);
  Tensor grad = Tensor::empty(shape, DType::f32);
  fill_normal(x, seed, 0.0, 1.0, 1);
  fill_normal(bias, seed, 0.0, 1.0, 2);
  fill_normal(grad, seed, 0.0, 1.0, 3);
  Tape fast_tape(Precision::fast);
  Var bias_fast = make_var(bias, true);
  fast_tape.backward(add_bias(fast_tape, make_var(x, true), bias_fast), grad);
  Tape reference_tape(Precision::reference_f64);
  Var bias_reference = make_var(convert(bias, DType::f64), true);
  reference_tape.backward(add_bias(reference_tape, make_var(convert(x, DType::f64), true), bias_reference),
                          convert(grad, DType::f64));
  for (int64_t i = 0; i < 19; ++i)
    EXPECT_NEAR(bias_fast->grad.ptr<float>()[i], bias_reference->grad.ptr<double>()[i], 1e-5) << "seed " << seed;
}

}  // namespace
}  // namespace lathe::autograd
