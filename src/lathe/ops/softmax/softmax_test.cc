// Softmax: finite-difference gradients of the reference, probability properties of every
// implementation (rows sum to 1, shift invariance, masking), and argument validation. The generic
// contract tests (tests/unit) compare every implementation with the reference.
#include "lathe/ops/softmax/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lathe/core/rng.h"
#include "finite_difference.h"
#include "test_seed.h"

namespace lathe {
namespace {

// Every CPU implementation this machine runs (the CUDA kernels' host emulations included).
std::vector<std::string> usable_impls() {
  std::vector<std::string> impls;
  for (const auto& impl : softmax_op().impls())
    if (impl.device == Device::cpu && isa_available(impl.isa)) impls.push_back(impl.name);
  return impls;
}

Tensor run_softmax(const Tensor& x, float scale, const std::string& impl) {
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  poison(y);
  SoftmaxArgs args{x, y, scale};
  Dispatch dispatch;
  dispatch.impl = impl;
  softmax(args, dispatch);
  return y;
}

TEST(SoftmaxTest, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  const int64_t rows = 3, cols = 9;
  const float scale = 0.7f;
  Tensor x = Tensor::empty({rows, cols}, DType::f64), probe = Tensor::empty({rows, cols}, DType::f64);
  fill_uniform(x, seed, -2, 2, 1);
  fill_uniform(probe, seed, -1, 1, 2);
  auto loss = [&] {
    Tensor y = Tensor::empty({rows, cols}, DType::f64);
    softmax_reference<double>({x, y, scale});
    double sum = 0;
    for (int64_t i = 0; i < y.numel(); ++i) sum += y.ptr<double>()[i] * probe.ptr<double>()[i];
    return sum;
  };
  Tensor y = Tensor::empty({rows, cols}, DType::f64), dx = Tensor::empty({rows, cols}, DType::f64);
  softmax_reference<double>({x, y, scale});
  softmax_backward_reference<double>({y, probe, dx, scale});
  expect_gradient_matches_finite_differences(x, dx, loss, "dx", seed, 1e-6, 1e-7);
}

TEST(SoftmaxTest, RowsSumToOneAndAreShiftInvariantOnEveryImpl) {
  const uint64_t seed = test_seed();
  for (const std::string& impl : usable_impls()) {
    for (int64_t cols : {1, 17, 1000, 4099}) {
      const int64_t rows = 4;
      Tensor x = Tensor::empty({rows, cols}, DType::f32), shifted = Tensor::empty({rows, cols}, DType::f32);
      fill_uniform(x, seed, -8, 8);
      // Add a per-row constant that is exactly representable at these magnitudes (a power of two
      // plus an integer), so x + shift is exact and only the softmax itself is tested.
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          shifted.ptr<float>()[r * cols + c] = x.ptr<float>()[r * cols + c] + static_cast<float>(r * 37 - 50);
      Tensor y = run_softmax(x, 0.5f, impl), y_shifted = run_softmax(shifted, 0.5f, impl);
      for (int64_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (int64_t c = 0; c < cols; ++c) {
          float value = y.ptr<float>()[r * cols + c];
          ASSERT_GE(value, 0.0f) << impl << " seed=" << seed;
          sum += value;
          EXPECT_NEAR(y_shifted.ptr<float>()[r * cols + c], value, 1e-6 * std::max(1.0f, value))
              << impl << " cols=" << cols << " r=" << r << " c=" << c << " seed=" << seed;
        }
        EXPECT_NEAR(sum, 1.0, 1e-5) << impl << " cols=" << cols << " row " << r << " seed=" << seed;
      }
    }
  }
}

TEST(SoftmaxTest, MaskedEntriesGetZeroAndFullyMaskedRowsAreZeroOnEveryImpl) {
  const uint64_t seed = test_seed();
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  const int64_t cols = 37;
  for (const std::string& impl : usable_impls()) {
    Tensor x = Tensor::empty({3, cols}, DType::f32);
    fill_uniform(x, seed, -3, 3);
    // Row 0: every third entry masked. Row 1: fully masked. Row 2: only the unmasked entries of
    // row 0, as a reference for row 0's survivors.
    int64_t kept = 0;
    std::vector<int64_t> kept_columns;
    for (int64_t c = 0; c < cols; ++c) {
      x.ptr<float>()[cols + c] = minus_infinity;
      if (c % 3 == 0) {
        x.ptr<float>()[c] = minus_infinity;
      } else {
        kept_columns.push_back(c);
        ++kept;
      }
    }
    Tensor compact = Tensor::empty({1, kept}, DType::f32);
    for (int64_t i = 0; i < kept; ++i) compact.ptr<float>()[i] = x.ptr<float>()[kept_columns[i]];
    Tensor y = run_softmax(x, 1.0f, impl), y_compact = run_softmax(compact, 1.0f, impl);
    for (int64_t c = 0; c < cols; ++c) {
      EXPECT_EQ(y.ptr<float>()[cols + c], 0.0f) << impl << " fully masked row, c=" << c;
      if (c % 3 == 0) {
        EXPECT_EQ(y.ptr<float>()[c], 0.0f) << impl << " masked c=" << c;
      }
    }
    for (int64_t i = 0; i < kept; ++i)
      EXPECT_NEAR(y.ptr<float>()[kept_columns[i]], y_compact.ptr<float>()[i], 1e-7) << impl << " seed=" << seed;
    // The fully masked row's gradient is zero.
    Tensor dy = Tensor::empty({3, cols}, DType::f32), dx = Tensor::empty({3, cols}, DType::f32);
    fill_uniform(dy, seed, -1, 1, 5);
    poison(dx);
    Dispatch dispatch;
    dispatch.impl = impl;
    softmax_backward({y, dy, dx, 1.0f}, dispatch);
    for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(dx.ptr<float>()[cols + c], 0.0f) << impl;
  }
}

TEST(SoftmaxTest, RejectsMisshapedArguments) {
  Tensor x = Tensor::zeros({4, 8}, DType::f32), y = Tensor::zeros({4, 8}, DType::f32);
  EXPECT_NO_THROW(softmax({x, y, 1.0f}));
  Tensor wrong = Tensor::zeros({4, 7}, DType::f32), bf16_y = Tensor::zeros({4, 8}, DType::bf16);
  Tensor flat = Tensor::zeros({32}, DType::f32);
  EXPECT_THROW(softmax({x, wrong, 1.0f}), Error);
  EXPECT_THROW(softmax({x, bf16_y, 1.0f}), Error);
  EXPECT_THROW(softmax({flat, flat, 1.0f}), Error);
  EXPECT_THROW(softmax({x, y, 0.0f}), Error);
  EXPECT_THROW(softmax({x, y, -1.0f}), Error);
  EXPECT_THROW(softmax_backward({y, wrong, y, 1.0f}), Error);
  EXPECT_THROW(softmax_backward({y, y, bf16_y, 1.0f}), Error);
}

}  // namespace
}  // namespace lathe
