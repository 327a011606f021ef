// Small tensors written out in a test, value by value (hand-computed examples).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe {

inline Tensor f32_tensor(const Shape& shape, const std::vector<float>& values) {
  Tensor tensor = Tensor::empty(shape, DType::f32);
  write_from_vector(tensor.view(), values);
  return tensor;
}

// Token or expert ids: i32, as the MoE ops take them.
inline Tensor i32_tensor(const Shape& shape, const std::vector<int32_t>& values) {
  Tensor tensor = Tensor::empty(shape, DType::i32);
  LATHE_CHECK(static_cast<int64_t>(values.size()) == tensor.numel(), "i32_tensor: ", values.size(), " values for ",
              tensor.numel(), " elements");
  std::copy(values.begin(), values.end(), tensor.ptr<int32_t>());
  return tensor;
}

}  // namespace lathe
