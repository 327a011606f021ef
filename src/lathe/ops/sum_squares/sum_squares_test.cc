// sum_squares beyond the registered problem's contract tests: sums known in closed form (exact in
// f64), accumulation onto out, and validation errors.
#include "lathe/ops/sum_squares/sum_squares.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

double sum_of(const Tensor& x, bool accumulate, double start) {
  Tensor out = Tensor::empty({1}, DType::f64);
  write_element(out, 0, start);
  sum_squares({x, out, accumulate});
  return read_element(out, 0);
}

TEST(SumSquares, KnownSumsAreExact) {
  Tensor x = Tensor::empty({2}, DType::f32);
  write_from_vector<float>(x, {3.0f, -4.0f});
  EXPECT_EQ(sum_of(x, false, 99.0), 25.0);  // out's old value ignored
  EXPECT_EQ(sum_of(x, true, 1.5), 26.5);
  // One element past a chunk of 65536: every square 0.25, the total exact in f64.
  Tensor halves = Tensor::empty({kSumSquaresChunk + 1}, DType::f32);
  fill_value(halves, 0.5);
  EXPECT_EQ(sum_of(halves, false, 0.0), 0.25 * static_cast<double>(kSumSquaresChunk + 1));
  EXPECT_EQ(sum_of(Tensor::empty({0}, DType::f32), true, 2.0), 2.0);
}

TEST(SumSquares, RejectsBadArguments) {
  Tensor x = Tensor::zeros({4}, DType::f32), out32 = Tensor::empty({1}, DType::f32);
  EXPECT_THROW(sum_squares({x, out32}), Error);
  Tensor out = Tensor::empty({1}, DType::f64), matrix = Tensor::zeros({2, 2}, DType::f32);
  EXPECT_THROW(sum_squares({matrix, out}), Error);
  Tensor wide = Tensor::empty({2}, DType::f64);
  EXPECT_THROW(sum_squares({x, wide}), Error);
}

}  // namespace
}  // namespace lathe
