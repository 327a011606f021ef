// linear_recurrence_ops: two segments chained through the state (the first segment's final state
// is the second's initial state, the first segment's output unused), differentiated on the tape in
// float64, against central finite differences of the same chain; and the f32 tape's gradients
// against the f64 tape's. This checks the plumbing the ops' own tests cannot: gradients entering
// through final_state, zero gradients for an unused output, and gradients reaching the initial state.
#include "lathe/autograd/linear_recurrence_ops.h"

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "finite_difference.h"
#include "sequence_test_util.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

// A chained op: inputs of the first segment, inputs of the second, then the initial state; returns
// the second segment's output.
using Chain = std::function<Var(Tape&, const std::vector<Var>&)>;

void check_chain(const std::vector<Tensor>& inputs, const Chain& chain, uint64_t seed, const std::string& name) {
  Tape shape_tape(Precision::reference_f64, false);
  std::vector<Var> plain;
  for (const Tensor& t : inputs) plain.push_back(make_var(t));
  const Tensor probe = random_tensor_for_test(chain(shape_tape, plain)->value.shape(), DType::f64, seed, 50, -1, 1);
  auto loss = [&] {
    Tape tape(Precision::reference_f64, false);
    std::vector<Var> vars;
    for (const Tensor& t : inputs) vars.push_back(make_var(t));
    return sum_of_products(chain(tape, vars)->value, probe);
  };
  Tape tape(Precision::reference_f64);
  std::vector<Var> vars;
  for (const Tensor& t : inputs) vars.push_back(make_var(t, true));
  tape.backward(chain(tape, vars), probe);
  for (size_t i = 0; i < inputs.size(); ++i)
    expect_gradient_matches_finite_differences(inputs[i], vars[i]->grad, loss, name + " input " + std::to_string(i),
                                               seed);
  // The fast (f32) tape against the f64 one.
  Tape fast_tape(Precision::fast);
  std::vector<Var> fast_vars;
  for (const Tensor& t : inputs) fast_vars.push_back(make_var(convert(t, DType::f32), true));
  fast_tape.backward(chain(fast_tape, fast_vars), convert(probe, DType::f32));
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_LE(relative_norm_difference(fast_vars[i]->grad, vars[i]->grad), 1e-5)
        << name << " input " << i << " seed=" << seed;
}

Tensor rnd(const Shape& shape, uint64_t seed, uint64_t stream, double low, double high) {
  return random_tensor_for_test(shape, DType::f64, seed, stream, low, high);
}

TEST(LinearRecurrenceOps, GatedDeltaRuleGradientsThroughTheState) {
  const uint64_t seed = test_seed();
  const int64_t b = 1, t = 3, hk = 1, hv = 2, dk = 3, dv = 2;
  std::vector<Tensor> inputs;
  for (int segment = 0; segment < 2; ++segment) {
    const uint64_t s = 10 * segment;
    inputs.push_back(rnd({b, t, hk, dk}, seed, s + 1, -1, 1));
    inputs.push_back(rnd({b, t, hk, dk}, seed, s + 2, -1, 1));
    inputs.push_back(rnd({b, t, hv, dv}, seed, s + 3, -1, 1));
    inputs.push_back(rnd({b, t, hv}, seed, s + 4, -0.5, 0));
    inputs.push_back(rnd({b, t, hv}, seed, s + 5, 0.05, 0.95));
  }
  inputs.push_back(rnd({b, hv, dk, dv}, seed, 30, -1, 1));
  GatedDeltaRuleOptions options;
  options.l2norm_qk = true;
  check_chain(
      inputs,
      [&](Tape& tape, const std::vector<Var>& x) {
        const RecurrentOutput first = gated_delta_rule(tape, x[0], x[1], x[2], x[3], x[4], x[10], options, true);
        return gated_delta_rule(tape, x[5], x[6], x[7], x[8], x[9], first.final_state, options, false).out;
      },
      seed, "gated_delta_rule");
}

TEST(LinearRecurrenceOps, SsdScanGradientsThroughTheState) {
  const uint64_t seed = test_seed();
  const int64_t b = 1, t = 3, h = 2, p = 2, g = 1, n = 3;
  std::vector<Tensor> inputs = {rnd({h}, seed, 1, -3, -1), rnd({h}, seed, 2, -1, 1)};  // a, d
  for (int segment = 0; segment < 2; ++segment) {
    const uint64_t s = 10 * segment;
    inputs.push_back(rnd({b, t, h, p}, seed, s + 3, -1, 1));
    inputs.push_back(rnd({b, t, h}, seed, s + 4, 0.05, 0.3));
    inputs.push_back(rnd({b, t, g, n}, seed, s + 5, -1, 1));
    inputs.push_back(rnd({b, t, g, n}, seed, s + 6, -1, 1));
  }
  inputs.push_back(rnd({b, h, p, n}, seed, 30, -1, 1));
  check_chain(
      inputs,
      [&](Tape& tape, const std::vector<Var>& x) {
        const RecurrentOutput first = ssd_scan(tape, x[2], x[3], x[0], x[4], x[5], x[1], x[10], true);
        return ssd_scan(tape, x[6], x[7], x[0], x[8], x[9], x[1], first.final_state, false).out;
      },
      seed, "ssd_scan");
}

TEST(LinearRecurrenceOps, ShortConvGradientsThroughTheState) {
  const uint64_t seed = test_seed();
  const int64_t b = 2, c = 3, k = 4;
  std::vector<Tensor> inputs = {rnd({c, k}, seed, 1, -0.5, 0.5), rnd({c}, seed, 2, -0.5, 0.5),
                                rnd({b, 2, c}, seed, 3, -2, 2),  // fewer tokens than the state holds
                                rnd({b, 5, c}, seed, 4, -2, 2), rnd({b, k - 1, c}, seed, 5, -2, 2)};
  ShortConvOptions options;
  check_chain(
      inputs,
      [&](Tape& tape, const std::vector<Var>& x) {
        const RecurrentOutput first = short_conv(tape, x[2], x[0], x[1], x[4], options, true);
        return short_conv(tape, x[3], x[0], x[1], first.final_state, options, false).out;
      },
      seed, "short_conv");
}

}  // namespace
}  // namespace lathe::autograd
