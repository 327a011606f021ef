// Bytes of a set of tensors for OpCost::bytes, skipping absent optional ones (data == nullptr).
#pragma once

#include <initializer_list>

#include "lathe/core/tensor.h"

namespace lathe {

inline double tensor_bytes(std::initializer_list<TensorView> views) {
  double bytes = 0;
  for (const TensorView& view : views)
    if (view.data != nullptr) bytes += static_cast<double>(view.numel()) * static_cast<double>(dtype_size(view.dtype));
  return bytes;
}

}  // namespace lathe
