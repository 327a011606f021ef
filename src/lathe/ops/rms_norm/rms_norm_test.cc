// RMSNorm specifics: the float64 reference backward against central finite differences of the
// reference forward (plain and Gemma's weight offset), a property derivable by hand, and
// validation errors.
#include <gtest/gtest.h>

#include <cmath>

#include "finite_difference.h"
#include "lathe/core/rng.h"
#include "lathe/ops/rms_norm/rms_norm.h"
#include "test_seed.h"

namespace lathe {
namespace {

Tensor random_f64(const Shape& shape, uint64_t seed, uint64_t stream, double low, double high) {
  Tensor tensor = Tensor::empty(shape, DType::f64);
  fill_uniform(tensor, seed, low, high, stream);
  return tensor;
}

TEST(RmsNormTest, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  for (float weight_offset : {0.0f, 1.0f}) {
    const int64_t rows = 3, dim = 7;
    const float eps = 1e-3f;  // large enough that the eps term matters in the derivative
    Tensor x = random_f64({rows, dim}, seed, 1, -1, 1), weight = random_f64({dim}, seed, 2, 0.5, 1.5);
    Tensor probe = random_f64({rows, dim}, seed, 3, -1, 1);
    Tensor y = Tensor::empty({rows, dim}, DType::f64);
    auto loss = [&] {
      Tensor out = Tensor::empty({rows, dim}, DType::f64);
      rms_norm_reference<double>({x, weight, out, TensorView{}, eps, weight_offset});
      double sum = 0;
      for (int64_t i = 0; i < out.numel(); ++i) sum += out.ptr<double>()[i] * probe.ptr<double>()[i];
      return sum;
    };

    Tensor inv_rms64 = Tensor::empty({rows}, DType::f64);
    rms_norm_reference<double>({x, weight, y, inv_rms64, eps, weight_offset});
    Tensor dx = Tensor::empty({rows, dim}, DType::f64), dweight = Tensor::empty({dim}, DType::f64);
    RmsNormBackwardArgs backward{x, weight, inv_rms64, probe, dx, dweight, weight_offset};
    rms_norm_backward_reference<double>(backward);
    expect_gradient_matches_finite_differences(x, dx, loss, "dx", seed);
    expect_gradient_matches_finite_differences(weight, dweight, loss, "dweight", seed);
  }
}

TEST(RmsNormTest, OutputRowsHaveUnitRootMeanSquareWithUnitWeight) {
  // With weight = 1 and eps -> 0, mean(y^2) = 1 for every row, whatever the scale of x.
  const uint64_t seed = test_seed();
  const int64_t rows = 4, dim = 301;
  Tensor x = Tensor::empty({rows, dim}, DType::f32), weight = Tensor::empty({dim}, DType::f32);
  fill_uniform(x, seed, -50, 50);
  fill_value(weight, 1.0);
  Tensor y = Tensor::empty({rows, dim}, DType::f32), inv_rms = Tensor::empty({rows}, DType::f32);
  rms_norm({x, weight, y, inv_rms, 1e-12f});
  for (int64_t r = 0; r < rows; ++r) {
    double sum_squares = 0;
    for (int64_t d = 0; d < dim; ++d) sum_squares += std::pow(y.ptr<float>()[r * dim + d], 2);
    EXPECT_NEAR(sum_squares / dim, 1.0, 1e-5) << "row " << r << " seed=" << seed;
  }
}

TEST(RmsNormTest, RejectsMisshapedArguments) {
  Tensor x = Tensor::empty({4, 8}, DType::f32), weight = Tensor::empty({8}, DType::f32);
  Tensor y = Tensor::empty({4, 8}, DType::f32), short_weight = Tensor::empty({7}, DType::f32);
  Tensor bf16_y = Tensor::empty({4, 8}, DType::bf16), f64_x = Tensor::empty({4, 8}, DType::f64);
  EXPECT_THROW(rms_norm({x, short_weight, y, TensorView{}}), Error);
  EXPECT_THROW(rms_norm({x, weight, bf16_y, TensorView{}}), Error);
  EXPECT_THROW(rms_norm({f64_x, weight, y, TensorView{}}), Error);
  EXPECT_THROW(rms_norm({x, weight, y, TensorView{}, 0.0f}), Error);
  try {
    rms_norm({x, short_weight, y, TensorView{}});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("rms_norm: weight has shape (7), expected (8)"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace lathe
