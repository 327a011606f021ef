// Central finite differences for checking float64 reference backwards: perturbs each element of
// `input` by +-step, evaluates `loss` (a scalar function of all inputs, typically
// sum(forward_output * probe)), and compares with `gradient` element by element.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "lathe/core/tensor.h"

namespace lathe {

inline void expect_gradient_matches_finite_differences(const Tensor& input, const Tensor& gradient,
                                                       const std::function<double()>& loss, const std::string& name,
                                                       uint64_t seed, double step = 1e-6, double tolerance = 1e-6) {
  ASSERT_EQ(input.dtype(), DType::f64);
  ASSERT_EQ(gradient.shape(), input.shape()) << name;
  for (int64_t i = 0; i < input.numel(); ++i) {
    double original = input.ptr<double>()[i];
    input.ptr<double>()[i] = original + step;
    double plus = loss();
    input.ptr<double>()[i] = original - step;
    double minus = loss();
    input.ptr<double>()[i] = original;
    double numeric = (plus - minus) / (2 * step);
    double analytic = read_element(gradient, i);
    EXPECT_NEAR(analytic, numeric, tolerance * std::max(1.0, std::fabs(numeric)))
        << name << "[" << i << "] seed=" << seed;
  }
}

}  // namespace lathe
