// Checks for autograd ops (autograd/*_ops.h) shared by their tests: seeded random f64 inputs, the
// f64 tape's gradients against central finite differences of a nonlinear probe loss, and the f32
// tape's output and gradients against the f64 tape's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "finite_difference.h"
#include "lathe/autograd/tape.h"
#include "lathe/core/rng.h"

namespace lathe::autograd {

// Normal(0, std) values of `shape` from (seed, stream), in f64 or converted to `dtype`.
inline Tensor random(const Shape& shape, uint64_t seed, uint64_t stream, double std = 1.0, DType dtype = DType::f64) {
  Tensor t = Tensor::empty(shape, DType::f64);
  fill_normal(t, seed, 0.0, std, stream);
  return dtype == DType::f64 ? t : convert(t, dtype);
}

// sum(out * probe) * sum(out) of an op over f64 inputs: nonlinear, so a wrong gradient cannot pass by symmetry.
inline double probe_loss(const Tensor& out, const Tensor& probe) {
  double dot = 0, total = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    dot += out.ptr<double>()[i] * probe.ptr<double>()[i];
    total += out.ptr<double>()[i];
  }
  return dot * total;
}

// Runs `op` on f64 inputs with gradients, seeds the probe loss, and checks every input's gradient
// against finite differences.
inline void check_finite_differences(std::vector<Tensor> inputs, const Tensor& probe,
                                     const std::function<Var(Tape&, const std::vector<Var>&)>& op, uint64_t seed,
                                     double tolerance = 1e-6) {
  auto loss = [&] {
    Tape tape(Precision::reference_f64, false);
    std::vector<Var> vars;
    for (const Tensor& t : inputs) vars.push_back(make_var(t));
    return probe_loss(op(tape, vars)->value, probe);
  };
  Tape tape(Precision::reference_f64);
  std::vector<Var> vars;
  for (const Tensor& t : inputs) vars.push_back(make_var(t, true));
  Var out = op(tape, vars);
  double dot = 0, total = 0;
  for (int64_t i = 0; i < out->value.numel(); ++i) {
    dot += out->value.ptr<double>()[i] * probe.ptr<double>()[i];
    total += out->value.ptr<double>()[i];
  }
  Tensor seed_grad = Tensor::empty(out->value.shape(), DType::f64);
  for (int64_t i = 0; i < seed_grad.numel(); ++i) seed_grad.ptr<double>()[i] = probe.ptr<double>()[i] * total + dot;
  tape.backward(out, seed_grad);
  for (size_t i = 0; i < inputs.size(); ++i)
    expect_gradient_matches_finite_differences(inputs[i], vars[i]->grad, loss, "input " + std::to_string(i), seed, 1e-6,
                                               tolerance);
}

// The f32 op's output and input gradients (for a random output gradient) against the f64 op's:
// |f32 - f64| <= tolerance x max(1, |f64|), since float32 rounding errors scale with the values
// (a gradient that sums a dozen terms can reach 40, where 1e-5 absolute is 4 float32 ulps).
inline void check_fast_matches_reference(const std::vector<Tensor>& inputs, const Shape& out_shape,
                                         const std::function<Var(Tape&, const std::vector<Var>&)>& op, uint64_t seed,
                                         double tolerance) {
  const Tensor grad = random(out_shape, seed, 99);
  std::vector<Var> fast_vars, reference_vars;
  for (const Tensor& t : inputs) {
    fast_vars.push_back(make_var(convert(t, DType::f32), true));
    reference_vars.push_back(make_var(t, true));
  }
  Tape fast_tape(Precision::fast), reference_tape(Precision::reference_f64);
  Var fast_out = op(fast_tape, fast_vars), reference_out = op(reference_tape, reference_vars);
  for (int64_t i = 0; i < fast_out->value.numel(); ++i)
    ASSERT_NEAR(read_element(fast_out->value, i), read_element(reference_out->value, i),
                tolerance * std::max(1.0, std::abs(read_element(reference_out->value, i))))
        << "output " << i << " seed " << seed;
  fast_tape.backward(fast_out, convert(grad, DType::f32));
  reference_tape.backward(reference_out, grad);
  for (size_t v = 0; v < inputs.size(); ++v)
    for (int64_t i = 0; i < inputs[v].numel(); ++i)
      ASSERT_NEAR(read_element(fast_vars[v]->grad, i), read_element(reference_vars[v]->grad, i),
                  tolerance * std::max(1.0, std::abs(read_element(reference_vars[v]->grad, i))))
          << "input " << v << " gradient " << i << " seed " << seed;
}

}  // namespace lathe::autograd
