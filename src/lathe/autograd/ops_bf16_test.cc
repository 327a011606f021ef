// The bf16 path of the linear op against float64 products of the bf16-rounded operands:
// forward round(x) @ round(W)^T, backward dx = round(g) @ round(W), dW += round(g)^T @ round(x).
// The only remaining difference is the f32 accumulation, so the tolerance is f32's (relative
// 1e-5 of the row's absolute sum), far below bf16's rounding (2^-9 ~ 2e-3), which the check
// against the unrounded product proves the path applied.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lathe/autograd/ops.h"
#include "lathe/core/half.h"
#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

std::vector<double> rounded(const Tensor& tensor) {
  std::vector<double> values = to_vector<double>(tensor);
  for (double& value : values) value = round_to_bf16(static_cast<float>(value));
  return values;
}

// c (m, n) = a (m, k) @ b^T where b is (n, k) (trans_b) or (k, n); |a| @ |b| into `magnitude`.
std::vector<double> product(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t k, int64_t n,
                            bool trans_a, bool trans_b, std::vector<double>* magnitude) {
  std::vector<double> c(m * n, 0.0);
  magnitude->assign(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) {
        const double left = trans_a ? a[p * m + i] : a[i * k + p];
        const double right = trans_b ? b[j * k + p] : b[p * n + j];
        c[i * n + j] += left * right;
        (*magnitude)[i * n + j] += std::abs(left * right);
      }
  return c;
}

void expect_close(const Tensor& got, const std::vector<double>& want, const std::vector<double>& magnitude,
                  const char* what, uint64_t seed) {
  const std::vector<double> values = to_vector<double>(got);
  ASSERT_EQ(values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(values[i], want[i], 1e-5 * magnitude[i] + 1e-30) << what << "[" << i << "] seed " << seed;
}

TEST(LinearBf16, ProductsUseTheRoundedOperandsWithF32Accumulation) {
  const uint64_t seed = test_seed();
  const int64_t rows = 13, in = 37, out = 19;  // not multiples of any vector width
  Tensor x_value = Tensor::empty({rows, in}, DType::f32), w_value = Tensor::empty({out, in}, DType::f32);
  Tensor grad = Tensor::empty({rows, out}, DType::f32);
  fill_normal(x_value, seed, 0.0, 1.0, 1);
  fill_normal(w_value, seed, 0.0, 1.0, 2);
  fill_normal(grad, seed, 0.0, 1.0, 3);
  Var x = make_var(x_value, true);
  Var weight = make_parameter(w_value, Tensor::zeros({out, in}, DType::f32));
  weight->value_bf16 = convert(w_value, DType::bf16);

  Tape tape;
  Var y = linear(tape, x, weight);
  tape.backward(y, grad);

  const std::vector<double> xr = rounded(x_value), wr = rounded(w_value), gr = rounded(grad);
  std::vector<double> magnitude;
  expect_close(y->value, product(xr, wr, rows, in, out, false, true, &magnitude), magnitude, "y", seed);
  expect_close(x->grad, product(gr, wr, rows, out, in, false, false, &magnitude), magnitude, "dx", seed);
  expect_close(weight->grad, product(gr, xr, out, rows, in, true, false, &magnitude), magnitude, "dweight", seed);

  // The unrounded product differs by far more than the tolerance above: bf16 was really used.
  const std::vector<double> exact =
      product(to_vector<double>(x_value), to_vector<double>(w_value), rows, in, out, false, true, &magnitude);
  double largest_difference = 0;
  const std::vector<double> got = to_vector<double>(y->value);
  for (size_t i = 0; i < exact.size(); ++i)
    largest_difference = std::max(largest_difference, std::abs(got[i] - exact[i]) / magnitude[i]);
  EXPECT_GT(largest_difference, 1e-4) << "seed " << seed;
}

TEST(LinearBf16, WithoutAWeightCopyTheOpStaysF32) {
  const uint64_t seed = test_seed();
  Tensor x_value = Tensor::empty({3, 5}, DType::f32), w_value = Tensor::empty({4, 5}, DType::f32);
  fill_normal(x_value, seed, 0.0, 1.0, 1);
  fill_normal(w_value, seed, 0.0, 1.0, 2);
  Tape tape(Precision::fast, /*recording=*/false);
  Var x = make_var(x_value);
  Var y = linear(tape, x, make_var(w_value));
  EXPECT_FALSE(x->value_bf16.defined());  // no conversion made
  std::vector<double> magnitude;
  const std::vector<double> want =
      product(to_vector<double>(x_value), to_vector<double>(w_value), 3, 5, 4, false, true, &magnitude);
  const std::vector<double> got = to_vector<double>(y->value);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * magnitude[i]) << i;
}

}  // namespace
}  // namespace lathe::autograd
