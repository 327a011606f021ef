// RMSNorm specifics: the float64 reference backward against central finite differences of the
// reference forward (plain and Gemma's weight offset), a property derivable by hand, and
// validation errors.
#include "lathe/ops/rms_norm/rms_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "finite_difference.h"
#include "lathe/core/half.h"
#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe {
namespace {

Tensor random_f64(const Shape& shape, uint64_t seed, uint64_t stream, double low, double high) {
  Tensor tensor = Tensor::empty(shape, DType::f64);
  fill_uniform(tensor, seed, low, high, stream);
  return tensor;
}

// A bf16 y beside an f32 x (bf16 training's normed input) is the f32 y rounded to nearest even,
// bit for bit, on every instruction set.
TEST(RmsNormTest, Bf16OutputIsTheF32OutputRounded) {
  const uint64_t seed = test_seed();
  const int64_t rows = 5, dim = 77;
  Tensor x = Tensor::empty({rows, dim}, DType::f32), weight = Tensor::empty({dim}, DType::f32);
  fill_uniform(x, seed, -3, 3, 1);
  fill_uniform(weight, seed, 0.5, 1.5, 2);
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_available(isa)) continue;
    const Dispatch dispatch{isa_name(isa)};
    Tensor y = Tensor::empty({rows, dim}, DType::f32), y16 = Tensor::empty({rows, dim}, DType::bf16);
    Tensor inv_rms = Tensor::empty({rows}, DType::f32), inv_rms16 = Tensor::empty({rows}, DType::f32);
    rms_norm({x, weight, y, inv_rms, 1e-6f, 1.0f}, dispatch);
    rms_norm({x, weight, y16, inv_rms16, 1e-6f, 1.0f}, dispatch);
    std::vector<float> want = to_vector<float>(y);
    for (float& value : want) value = round_to_bf16(value);
    EXPECT_EQ(to_vector<float>(y16), want) << isa_name(isa) << " seed=" << seed;
    EXPECT_EQ(to_vector<float>(inv_rms16), to_vector<float>(inv_rms)) << isa_name(isa);
  }
  // bf16 x with an f32 y is refused (only f32 -> bf16 is a rounding).
  Tensor x16 = convert(x, DType::bf16), y = Tensor::empty({rows, dim}, DType::f32);
  EXPECT_THROW(rms_norm({x16, weight, y, {}, 1e-6f, 0.0f}), Error);
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
  Tensor f16_y = Tensor::empty({4, 8}, DType::f16), f64_x = Tensor::empty({4, 8}, DType::f64);
  EXPECT_THROW(rms_norm({x, short_weight, y, TensorView{}}), Error);
  EXPECT_THROW(rms_norm({x, weight, f16_y, TensorView{}}), Error);  // (a bf16 y is allowed: the test above)
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
