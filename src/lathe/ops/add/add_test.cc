// add-specific tests: a hand-computed case, in-place aliasing of either input, and validation
// errors. (Random shapes against the float64 reference run in the generic op-contract tests.)
#include "lathe/ops/add/add.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TEST(Add, HandComputedValues) {
  Tensor a = Tensor::empty({5}, DType::f32), b = Tensor::empty({5}, DType::f32), out = Tensor::empty({5}, DType::f32);
  write_from_vector<float>(a, {1, 2, 3, 4, 5});
  write_from_vector<float>(b, {10, 20, 30, 40, 50});
  add({a, b, out, -0.5f});
  EXPECT_EQ(to_vector<float>(out), (std::vector<float>{-4, -8, -12, -16, -20}));
}

TEST(Add, InPlaceIntoEitherInput) {
  Tensor a = Tensor::empty({2, 3}, DType::f32), b = Tensor::empty({2, 3}, DType::f32);
  write_from_vector<float>(a, {1, 2, 3, 4, 5, 6});
  write_from_vector<float>(b, {1, 1, 1, 1, 1, 1});
  add({a, b, a});  // a += b
  EXPECT_EQ(to_vector<float>(a), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  add({a, b, b, 2.0f});  // b = a + 2b
  EXPECT_EQ(to_vector<float>(b), (std::vector<float>{4, 5, 6, 7, 8, 9}));
}

TEST(Add, ValidationErrorsNameTheArgument) {
  Tensor a = Tensor::empty({4}, DType::f32), b = Tensor::empty({5}, DType::f32), h = Tensor::empty({4}, DType::bf16);
  Tensor wide = Tensor::empty({4, 2}, DType::f32);
  EXPECT_THROW(add({a, b, a}), Error);
  EXPECT_THROW(add({a, h, a}), Error);
  Tensor c = Tensor::empty({2, 4}, DType::f32);
  EXPECT_THROW(add({wide.view().transpose(0, 1), c, c}), Error);  // not contiguous
  try {
    add({a, b, a});
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("b"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace lathe
