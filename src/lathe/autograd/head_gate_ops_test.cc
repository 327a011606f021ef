// autograd::head_gate on the tape, in each of its uses (Mamba-2's clamped step size and decay,
// Qwen3-Next's g and beta): the f64 tape's gradients against central finite differences, the f32
// tape (the head_gate op's kernels) against the f64 tape (its float64 reference), and a leading
// batch axis flattened into rows.
#include "lathe/autograd/head_gate_ops.h"

#include <gtest/gtest.h>

#include "autograd_op_checks.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

// x: inputs[0] (rows, heads); bias and a_log: inputs[1] and inputs[2] where the case uses them.
struct GateCase {
  const char* name;
  HeadGateActivation activation;
  bool bias, a_log;
  double lower, upper;
};

const GateCase kCases[] = {
    {"Mamba-2 step size", HeadGateActivation::softplus, true, false, 0.05, 1.5},
    {"Mamba-2 decay", HeadGateActivation::negative_exp, false, false, -INFINITY, INFINITY},
    {"Qwen3-Next g", HeadGateActivation::softplus, true, true, -INFINITY, INFINITY},
    {"Qwen3-Next beta", HeadGateActivation::sigmoid, false, false, -INFINITY, INFINITY},
};

Var run_case(Tape& tape, const GateCase& c, const std::vector<Var>& vars) {
  const Var bias = c.bias ? vars[1] : nullptr;
  const Var a_log = c.a_log ? vars[c.bias ? 2 : 1] : nullptr;
  return head_gate(tape, vars[0], bias, a_log, c.activation, c.lower, c.upper);
}

std::vector<Tensor> case_inputs(const GateCase& c, const Shape& x_shape, uint64_t seed) {
  const int64_t heads = x_shape[x_shape.rank() - 1];
  std::vector<Tensor> inputs = {random(x_shape, seed, 1)};
  if (c.bias) inputs.push_back(random({heads}, seed, 2, 0.5));
  if (c.a_log) inputs.push_back(random({heads}, seed, 3, 0.5));
  return inputs;
}

TEST(HeadGateTape, Float64GradientsMatchFiniteDifferences) {
  const uint64_t seed = test_seed();
  for (const GateCase& c : kCases) {
    SCOPED_TRACE(c.name);
    const std::vector<Tensor> inputs = case_inputs(c, {5, 3}, seed);
    check_finite_differences(
        inputs, random({5, 3}, seed, 4),
        [&](Tape& tape, const std::vector<Var>& vars) { return run_case(tape, c, vars); }, seed);
  }
}

TEST(HeadGateTape, FastPathMatchesTheFloat64PathWithABatchAxis) {
  const uint64_t seed = test_seed();
  for (const GateCase& c : kCases) {
    SCOPED_TRACE(c.name);
    // (2, 70, 4): rows beyond one 64-row block of the per-head sums.
    check_fast_matches_reference(
        case_inputs(c, {2, 70, 4}, seed), {2, 70, 4},
        [&](Tape& tape, const std::vector<Var>& vars) { return run_case(tape, c, vars); }, seed, 1e-5);
  }
}

}  // namespace
}  // namespace lathe::autograd
