// column_sums beyond the registered problem's contract tests: the f64 accumulation in row order
// (a column that f32 would sum to 0 sums to 1), accumulation onto out, and validation errors.
#include "lathe/ops/column_sums/column_sums.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TEST(ColumnSums, SumsInF64WithTheRowsInOrder) {
  Tensor x = Tensor::empty({3, 2}, DType::f32);
  // Column 0: 1e8 + 1 - 1e8 is 1 in f64 (f32 would drop the 1); column 1: 0.5 + 0.25 + 2.
  write_from_vector<float>(x, {1e8f, 0.5f, 1.0f, 0.25f, -1e8f, 2.0f});
  Tensor out = Tensor::empty({2}, DType::f32);
  column_sums({x, out});
  EXPECT_EQ(to_vector<float>(out), (std::vector<float>{1.0f, 2.75f}));
  column_sums({x, out, /*accumulate=*/true});
  EXPECT_EQ(to_vector<float>(out), (std::vector<float>{2.0f, 5.5f}));
}

TEST(ColumnSums, RejectsBadArguments) {
  Tensor x = Tensor::zeros({4, 3}, DType::f32);
  Tensor narrow = Tensor::empty({2}, DType::f32), wide64 = Tensor::empty({3}, DType::f64);
  EXPECT_THROW(column_sums({x, narrow}), Error);
  EXPECT_THROW(column_sums({x, wide64}), Error);
  Tensor vector = Tensor::zeros({3}, DType::f32), out = Tensor::empty({3}, DType::f32);
  EXPECT_THROW(column_sums({vector, out}), Error);
}

}  // namespace
}  // namespace lathe
