// LayerNorm: finite-difference gradients of the reference, normalisation properties of every
// implementation, and argument validation. The generic contract tests (tests/unit) compare every
// implementation with the reference.
#include "lathe/ops/layer_norm/layer_norm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/rng.h"
#include "finite_difference.h"
#include "test_seed.h"

namespace lathe {
namespace {

Tensor random_f64(const Shape& shape, uint64_t seed, uint64_t stream, double low, double high) {
  Tensor tensor = Tensor::empty(shape, DType::f64);
  fill_uniform(tensor, seed, low, high, stream);
  return tensor;
}

// loss = sum(y * probe) with y = layer_norm(x, weight, bias), in float64 via the reference.
double probe_loss(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& probe) {
  Tensor y = Tensor::empty(x.shape(), DType::f64);
  LayerNormArgs args;
  args.x = x;
  args.weight = weight;
  args.bias = bias;
  args.y = y;
  args.eps = 1e-3f;  // large enough to matter in the gradient
  layer_norm_reference<double>(args);
  double loss = 0;
  for (int64_t i = 0; i < y.numel(); ++i) loss += y.ptr<double>()[i] * probe.ptr<double>()[i];
  return loss;
}

TEST(LayerNormTest, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  const int64_t rows = 3, dim = 7;
  Tensor x = random_f64({rows, dim}, seed, 1, -1, 2), weight = random_f64({dim}, seed, 2, 0.5, 1.5);
  Tensor bias = random_f64({dim}, seed, 3, -0.5, 0.5), probe = random_f64({rows, dim}, seed, 4, -1, 1);

  LayerNormArgs forward;
  forward.x = x;
  forward.weight = weight;
  forward.bias = bias;
  Tensor y = Tensor::empty({rows, dim}, DType::f64);
  forward.y = y;
  Tensor mean = Tensor::empty({rows}, DType::f64), inv_std = Tensor::empty({rows}, DType::f64);
  forward.mean = mean;
  forward.inv_std = inv_std;
  forward.eps = 1e-3f;
  layer_norm_reference<double>(forward);

  LayerNormBackwardArgs backward;
  backward.x = x;
  backward.weight = weight;
  backward.mean = mean;
  backward.inv_std = inv_std;
  backward.dy = probe;
  Tensor dx = Tensor::empty({rows, dim}, DType::f64), dweight = Tensor::empty({dim}, DType::f64);
  Tensor dbias = Tensor::empty({dim}, DType::f64);
  backward.dx = dx;
  backward.dweight = dweight;
  backward.dbias = dbias;
  layer_norm_backward_reference<double>(backward);

  auto loss = [&] { return probe_loss(x, weight, bias, probe); };
  expect_gradient_matches_finite_differences(x, dx, loss, "dx", seed);
  expect_gradient_matches_finite_differences(weight, dweight, loss, "dweight", seed);
  expect_gradient_matches_finite_differences(bias, dbias, loss, "dbias", seed);
}

TEST(LayerNormTest, NormalizedRowsHaveZeroMeanAndUnitVarianceOnEveryImpl) {
  const uint64_t seed = test_seed();
  for (const char* impl : {"avx512", "avx2", "scalar"}) {
    if (!isa_available(parse_isa(impl))) continue;
    for (int64_t dim : {17, 256, 4099}) {
      const int64_t rows = 5;
      Tensor x = Tensor::empty({rows, dim}, DType::f32), weight = Tensor::empty({dim}, DType::f32);
      fill_uniform(x, seed, 3.0, 7.0);  // a mean far from zero
      fill_value(weight, 1.0);
      Tensor y = Tensor::empty({rows, dim}, DType::f32);
      LayerNormArgs args;
      args.x = x;
      args.weight = weight;
      args.y = y;
      args.eps = 1e-9f;
      Dispatch dispatch;
      dispatch.impl = impl;
      layer_norm(args, dispatch);
      for (int64_t r = 0; r < rows; ++r) {
        double sum = 0, sum_squares = 0;
        for (int64_t d = 0; d < dim; ++d) sum += y.ptr<float>()[r * dim + d];
        double mean = sum / dim;
        for (int64_t d = 0; d < dim; ++d) sum_squares += std::pow(y.ptr<float>()[r * dim + d] - mean, 2);
        EXPECT_NEAR(mean, 0.0, 1e-5) << impl << " dim=" << dim << " row " << r << " seed=" << seed;
        EXPECT_NEAR(sum_squares / dim, 1.0, 1e-4) << impl << " dim=" << dim << " row " << r << " seed=" << seed;
      }
    }
  }
}

TEST(LayerNormTest, RejectsMisshapedArguments) {
  Tensor x = Tensor::zeros({4, 8}, DType::f32), weight = Tensor::zeros({8}, DType::f32);
  Tensor y = Tensor::zeros({4, 8}, DType::f32), wrong_bias = Tensor::zeros({7}, DType::f32);
  LayerNormArgs args;
  args.x = x;
  args.weight = weight;
  args.y = y;
  EXPECT_NO_THROW(layer_norm(args));
  LayerNormArgs bad_bias = args;
  bad_bias.bias = wrong_bias;
  EXPECT_THROW(layer_norm(bad_bias), Error);
  LayerNormArgs bad_y = args;
  Tensor wrong_y = Tensor::zeros({4, 9}, DType::f32);
  bad_y.y = wrong_y;
  EXPECT_THROW(layer_norm(bad_y), Error);
  LayerNormArgs bad_eps = args;
  bad_eps.eps = 0;
  EXPECT_THROW(layer_norm(bad_eps), Error);
  LayerNormArgs bad_dtype = args;
  Tensor bf16_y = Tensor::zeros({4, 8}, DType::bf16);
  bad_dtype.y = bf16_y;
  EXPECT_THROW(layer_norm(bad_dtype), Error);

  LayerNormBackwardArgs backward;
  Tensor mean = Tensor::zeros({4}, DType::f32), inv_std = Tensor::zeros({3}, DType::f32);
  backward.x = x;
  backward.weight = weight;
  backward.mean = mean;
  backward.inv_std = inv_std;  // wrong: (3) for 4 rows
  backward.dy = y;
  backward.dx = y;
  backward.dweight = weight;
  EXPECT_THROW(layer_norm_backward(backward), Error);
}

}  // namespace
}  // namespace lathe
