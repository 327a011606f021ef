// shared_expert_ops: add_sigmoid_gated against an explicit f64 definition, and
// linear over stack_rows against the separate products of each weight; each f64 backward against
// finite differences and the f32 tape against the f64 one; stack_rows' gradients accumulated onto
// parameters that already hold one, and its bf16 copies.
#include "lathe/autograd/shared_expert_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd_op_checks.h"
#include "lathe/autograd/ops.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

// y + x * sigmoid(gate) per row, written out in f64.
Tensor naive_add_sigmoid_gated(const Tensor& y, const Tensor& x, const Tensor& gate) {
  Tensor out = Tensor::empty(x.shape(), DType::f64);
  const int64_t d = x.dim(1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double s = 1.0 / (1.0 + std::exp(-read_element(gate, i / d)));
    out.ptr<double>()[i] = read_element(y, i) + read_element(x, i) * s;
  }
  return out;
}

Var gated_sum(Tape& tape, const std::vector<Var>& v) { return add_sigmoid_gated(tape, v[0], v[1], v[2]); }

TEST(AddSigmoidGated, MatchesExplicitDefinition) {
  const uint64_t seed = test_seed();
  for (auto [rows, d] : {std::pair<int64_t, int64_t>{1, 1}, {7, 19}, {300, 64}}) {  // 300 rows: several tasks
    const Tensor y = random({rows, d}, seed, 1), x = random({rows, d}, seed, 2), gate = random({rows, 1}, seed, 3, 2.0);
    const Tensor expected = naive_add_sigmoid_gated(y, x, gate);
    for (Precision precision : {Precision::reference_f64, Precision::fast}) {
      const DType dtype = precision == Precision::fast ? DType::f32 : DType::f64;
      Tape tape(precision, false);
      Var out =
          gated_sum(tape, {make_var(convert(y, dtype)), make_var(convert(x, dtype)), make_var(convert(gate, dtype))});
      const double tolerance = precision == Precision::fast ? 1e-5 : 1e-14;
      for (int64_t i = 0; i < expected.numel(); ++i)
        ASSERT_NEAR(read_element(out->value, i), expected.ptr<double>()[i], tolerance)
            << rows << "x" << d << " element " << i << " seed " << seed;
    }
  }
}

TEST(AddSigmoidGated, BackwardMatchesFiniteDifferencesAndReference) {
  const uint64_t seed = test_seed();
  check_finite_differences({random({5, 7}, seed, 1), random({5, 7}, seed, 2), random({5, 1}, seed, 3, 2.0)},
                           random({5, 7}, seed, 4), gated_sum, seed);
  check_fast_matches_reference({random({261, 33}, seed, 5), random({261, 33}, seed, 6), random({261, 1}, seed, 7, 2.0)},
                               {261, 33}, gated_sum, seed, 1e-5);
}

// x @ [a; b; c]^T through one stacked linear.
Var stacked_linear(Tape& tape, const std::vector<Var>& v) {
  const Var weights[] = {v[1], v[2], v[3]};
  return linear(tape, v[0], stack_rows(tape, weights));
}

TEST(StackRows, LinearOverStackEqualsSeparateProducts) {
  const uint64_t seed = test_seed();
  const Tensor x = random({9, 13}, seed, 1);
  const std::vector<Tensor> weights = {random({5, 13}, seed, 2), random({1, 13}, seed, 3), random({17, 13}, seed, 4)};
  for (Precision precision : {Precision::reference_f64, Precision::fast}) {
    const DType dtype = precision == Precision::fast ? DType::f32 : DType::f64;
    Tape tape(precision, false);
    Var out = stacked_linear(tape, {make_var(convert(x, dtype)), make_var(convert(weights[0], dtype)),
                                    make_var(convert(weights[1], dtype)), make_var(convert(weights[2], dtype))});
    ASSERT_EQ(out->value.shape(), Shape({9, 23}));
    int64_t column = 0;
    for (const Tensor& w : weights) {
      for (int64_t r = 0; r < 9; ++r)
        for (int64_t j = 0; j < w.dim(0); ++j) {
          double expected = 0;
          for (int64_t p = 0; p < 13; ++p) expected += x.ptr<double>()[r * 13 + p] * w.ptr<double>()[j * 13 + p];
          ASSERT_NEAR(read_element(out->value, r * 23 + column + j), expected,
                      precision == Precision::fast ? 1e-5 : 1e-12)
              << "row " << r << " column " << column + j << " seed " << seed;
        }
      column += w.dim(0);
    }
  }
}

TEST(StackRows, BackwardMatchesFiniteDifferencesAndReference) {
  const uint64_t seed = test_seed();
  check_finite_differences(
      {random({4, 6}, seed, 1), random({3, 6}, seed, 2), random({1, 6}, seed, 3), random({2, 6}, seed, 4)},
      random({4, 6}, seed, 5), stacked_linear, seed);
  check_fast_matches_reference(
      {random({40, 33}, seed, 6), random({19, 33}, seed, 7), random({1, 33}, seed, 8), random({24, 33}, seed, 9)},
      {40, 44}, stacked_linear, seed, 1e-4);
}

// Parameters hold a gradient already (micro-batch accumulation): each receives its rows of the
// stack's gradient on top, counted as one contribution; the same as separate linears give.
TEST(StackRows, AccumulatesOntoParameterGradients) {
  const uint64_t seed = test_seed();
  const Tensor x = random({6, 8}, seed, 1, 1.0, DType::f32), probe = random({6, 7}, seed, 2, 1.0, DType::f32);
  const std::vector<Tensor> values = {random({3, 8}, seed, 3, 1.0, DType::f32),
                                      random({4, 8}, seed, 4, 1.0, DType::f32)};
  const Tensor initial = random({7, 8}, seed, 5, 1.0, DType::f32);
  std::vector<Var> stacked_params, separate_params;
  int64_t offset = 0;
  for (const Tensor& value : values) {
    for (std::vector<Var>* params : {&stacked_params, &separate_params}) {
      Tensor grad = Tensor::empty(value.shape(), DType::f32);
      for (int64_t i = 0; i < grad.numel(); ++i) grad.ptr<float>()[i] = initial.ptr<float>()[offset + i];
      params->push_back(make_parameter(value, grad));
    }
    offset += value.numel();
  }
  Tape stacked_tape;
  Var stacked_out = linear(stacked_tape, make_var(x), stack_rows(stacked_tape, stacked_params));
  stacked_tape.backward(stacked_out, probe);
  for (size_t w = 0; w < values.size(); ++w) {
    Tape tape;
    const int64_t first = w == 0 ? 0 : values[0].dim(0), count = values[w].dim(0);
    Tensor part_probe = Tensor::empty({6, count}, DType::f32);
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t j = 0; j < count; ++j)
        part_probe.ptr<float>()[r * count + j] = probe.ptr<float>()[r * 7 + first + j];
    tape.backward(linear(tape, make_var(x), separate_params[w]), part_probe);
    EXPECT_EQ(stacked_params[w]->grad_contributions, 1) << "weight " << w;
    for (int64_t i = 0; i < values[w].numel(); ++i)
      ASSERT_NEAR(read_element(stacked_params[w]->grad, i), read_element(separate_params[w]->grad, i), 1e-5)
          << "weight " << w << " element " << i << " seed " << seed;
  }
}

// Weights with bf16 copies: the stack carries their copies, so the product runs on the bf16 values.
TEST(StackRows, CarriesBf16Copies) {
  const uint64_t seed = test_seed();
  const Var a = make_var(random({5, 16}, seed, 1, 1.0, DType::f32));
  const Var b = make_var(random({3, 16}, seed, 2, 1.0, DType::f32));
  bf16_value(a);
  bf16_value(b);
  Tape tape(Precision::fast, false);
  const Var weights[] = {a, b};
  Var stacked = stack_rows(tape, weights);
  ASSERT_TRUE(stacked->value_bf16.defined());
  for (int64_t i = 0; i < 5 * 16; ++i)
    ASSERT_EQ(read_element(stacked->value_bf16, i), read_element(a->value_bf16, i)) << "element " << i;
  for (int64_t i = 0; i < 3 * 16; ++i)
    ASSERT_EQ(read_element(stacked->value_bf16, 5 * 16 + i), read_element(b->value_bf16, i)) << "element " << i;
}

}  // namespace
}  // namespace lathe::autograd
