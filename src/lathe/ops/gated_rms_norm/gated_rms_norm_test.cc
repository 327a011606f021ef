// gated_rms_norm beyond the registered problem's contract tests: values worked out by hand, the
// reference backward against central differences of the reference forward in double, and
// validation errors.
#include "lathe/ops/gated_rms_norm/gated_rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/rng.h"
#include "tensor_values.h"
#include "test_seed.h"

namespace lathe {
namespace {

double silu(double x) { return x / (1 + std::exp(-x)); }

TEST(GatedRmsNormOp, MatchesHandComputedValues) {
  // One row of 4 in 2 groups, eps 0. Group 0: y = (1, 2), z = (0, 0): g = 0 and the output 0 (the
  // RMS of zeros with eps 0 is 0: guarded by eps in use, so eps 1e-6 here and g = 0 gives 0).
  // Group 1: y = (1, 1), z = (1, -1): g = (silu(1), -silu(-1)); r = 1 / sqrt((g0^2 + g1^2) / 2);
  // out = weight * g * r with weight (1, 1, 2, 3).
  Tensor y = f32_tensor({1, 4}, {1.0f, 2.0f, 1.0f, 1.0f}), z = f32_tensor({1, 4}, {0.0f, 0.0f, 1.0f, -1.0f});
  Tensor weight = f32_tensor({4}, {1.0f, 1.0f, 2.0f, 3.0f}), out = Tensor::empty({1, 4}, DType::f32);
  gated_rms_norm({y, z, weight, out, 2, 1e-6});
  const std::vector<float> o = to_vector<float>(out);
  const double g0 = silu(1.0), g1 = silu(-1.0), r = 1 / std::sqrt((g0 * g0 + g1 * g1) / 2 + 1e-6);
  EXPECT_EQ(o[0], 0.0f);
  EXPECT_EQ(o[1], 0.0f);
  EXPECT_NEAR(o[2], 2 * g0 * r, 1e-6);
  EXPECT_NEAR(o[3], 3 * g1 * r, 1e-6);
  // One group over all four: group 0's zeros now count in the mean.
  gated_rms_norm({y, z, weight, out, 1, 1e-6});
  const double r_all = 1 / std::sqrt((g0 * g0 + g1 * g1) / 4 + 1e-6);
  EXPECT_NEAR(to_vector<float>(out)[3], 3 * g1 * r_all, 1e-6);
}

TEST(GatedRmsNormOp, ReferenceBackwardMatchesCentralDifferences) {
  const int64_t rows = 3, width = 6, groups = 2;
  const uint64_t seed = test_seed();
  auto values = [&](int64_t stream, size_t n, double low, double high) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = low + (high - low) * uniform_at(seed, stream, i);
    return v;
  };
  const size_t n = static_cast<size_t>(rows * width);
  const std::vector<double> y0 = values(0, n, -2, 2), z0 = values(1, n, -2, 2), w0 = values(2, width, 0.5, 1.5);
  const std::vector<double> dout = values(3, n, -1, 1);
  auto tensor = [](const std::vector<double>& v, Shape shape) {
    Tensor t = Tensor::empty(shape, DType::f64);
    write_from_vector(t, v);
    return t;
  };
  auto loss = [&](const std::vector<double>& y, const std::vector<double>& z, const std::vector<double>& w) {
    const Tensor ty = tensor(y, {rows, width}), tz = tensor(z, {rows, width}), tw = tensor(w, {width});
    Tensor out = Tensor::empty({rows, width}, DType::f64);
    gated_rms_norm_reference<double>({ty, tz, tw, out, groups, 1e-5});
    const std::vector<double> o = to_vector<double>(out);
    double total = 0;
    for (size_t i = 0; i < o.size(); ++i) total += dout[i] * o[i];
    return total;
  };
  const Tensor ty = tensor(y0, {rows, width}), tz = tensor(z0, {rows, width}), tw = tensor(w0, {width});
  const Tensor tdout = tensor(dout, {rows, width});
  Tensor dy = Tensor::empty({rows, width}, DType::f64), dz = Tensor::empty({rows, width}, DType::f64);
  Tensor dweight = Tensor::empty({width}, DType::f64);
  gated_rms_norm_backward_reference<double>({ty, tz, tw, tdout, dy, dz, dweight, groups, 1e-5});
  const double h = 1e-6;
  auto check = [&](const std::vector<double>& analytic, int which, const char* name) {
    for (size_t i = 0; i < analytic.size(); ++i) {
      std::vector<double> plus[3] = {y0, z0, w0}, minus[3] = {y0, z0, w0};
      plus[which][i] += h, minus[which][i] -= h;
      const double numeric = (loss(plus[0], plus[1], plus[2]) - loss(minus[0], minus[1], minus[2])) / (2 * h);
      EXPECT_NEAR(analytic[i], numeric, 1e-6 * (1 + std::fabs(numeric)))
          << name << " element " << i << " seed=" << seed;
    }
  };
  check(to_vector<double>(dy), 0, "dy");
  check(to_vector<double>(dz), 1, "dz");
  check(to_vector<double>(dweight), 2, "dweight");
}

TEST(GatedRmsNormOp, RejectsBadArguments) {
  Tensor y = Tensor::zeros({2, 6}, DType::f32), z = Tensor::zeros({2, 6}, DType::f32);
  Tensor weight = Tensor::zeros({6}, DType::f32), out = Tensor::empty({2, 6}, DType::f32);
  EXPECT_THROW(gated_rms_norm({y, z, weight, out, 4, 1e-5}), Error);  // 4 groups do not divide 6
  EXPECT_THROW(gated_rms_norm({y, z, weight, out, 0, 1e-5}), Error);
  EXPECT_THROW(gated_rms_norm({y, z, weight, out, 2, -1.0}), Error);
  Tensor short_weight = Tensor::zeros({5}, DType::f32);
  EXPECT_THROW(gated_rms_norm({y, z, short_weight, out, 1, 1e-5}), Error);
  try {
    gated_rms_norm({y, z, weight, out, 4, 1e-5});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("gated_rms_norm: groups=4"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace lathe
