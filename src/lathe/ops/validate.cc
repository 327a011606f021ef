#include "lathe/ops/validate.h"

#include "lathe/device/device_tensor.h"

namespace lathe {

TensorView host_readable(const TensorView& view, Tensor& storage) {
  if (view.device == Device::cpu || view.data == nullptr) return view;
  storage = cuda::to_host(view);
  return storage.view();
}

ArgChecker& ArgChecker::present(const char* name, const TensorView& view) {
  LATHE_CHECK(view.data != nullptr || view.numel() == 0 || view.rank() == 0, op_, ": ", name, " is missing");
  LATHE_CHECK(view.rank() > 0, op_, ": ", name, " is missing");
  return *this;
}

ArgChecker& ArgChecker::rank(const char* name, const TensorView& view, int expected) {
  present(name, view);
  LATHE_CHECK(view.rank() == expected, op_, ": ", name, " has rank ", view.rank(), " (shape ", view.shape.to_string(),
              "), expected rank ", expected);
  return *this;
}

ArgChecker& ArgChecker::shape(const char* name, const TensorView& view, std::initializer_list<int64_t> expected) {
  present(name, view);
  Shape want(expected);
  LATHE_CHECK(view.shape == want, op_, ": ", name, " has shape ", view.shape.to_string(), ", expected ",
              want.to_string());
  return *this;
}

ArgChecker& ArgChecker::dtype(const char* name, const TensorView& view, DType expected) {
  LATHE_CHECK(view.dtype == expected, op_, ": ", name, " has dtype ", dtype_name(view.dtype), ", expected ",
              dtype_name(expected));
  return *this;
}

ArgChecker& ArgChecker::dtype_in(const char* name, const TensorView& view, std::initializer_list<DType> allowed) {
  std::string list;
  for (DType candidate : allowed) {
    if (candidate == view.dtype) return *this;
    list += (list.empty() ? "" : " or ") + std::string(dtype_name(candidate));
  }
  throw_error(op_, ": ", name, " has dtype ", dtype_name(view.dtype), ", expected ", list);
}

ArgChecker& ArgChecker::output_dtype(const char* name, const TensorView& view, DType input) {
  return input == DType::f32 ? dtype_in(name, view, {DType::f32, DType::bf16}) : dtype(name, view, input);
}

ArgChecker& ArgChecker::contiguous(const char* name, const TensorView& view) {
  LATHE_CHECK(view.is_contiguous(), op_, ": ", name, " must be contiguous (shape ", view.shape.to_string(),
              ", strides ", view.strides.to_string(), ")");
  return *this;
}

ArgChecker& ArgChecker::inner_contiguous(const char* name, const TensorView& view) {
  LATHE_CHECK(view.rank() == 0 || view.dim(-1) <= 1 || view.stride(-1) == 1, op_, ": ", name,
              " must have unit stride on its last axis (strides ", view.strides.to_string(), ")");
  return *this;
}

ArgChecker& ArgChecker::positive(const char* name, double value) {
  LATHE_CHECK(value > 0, op_, ": ", name, " must be positive, got ", value);
  return *this;
}

ArgChecker& ArgChecker::at_least(const char* name, int64_t value, int64_t minimum) {
  LATHE_CHECK(value >= minimum, op_, ": ", name, " must be at least ", minimum, ", got ", value);
  return *this;
}

}  // namespace lathe
