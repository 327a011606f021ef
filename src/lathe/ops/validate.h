// Argument validation for op entry points. Each failed check throws lathe::Error naming the op,
// the argument, what was expected and what was given:
//   "rms_norm: weight has shape (512), expected (768)"
#pragma once

#include <initializer_list>
#include <string>

#include "lathe/core/tensor.h"

namespace lathe {

// A view whose elements host code may read, for checks of index arguments (token ids, targets):
// `view` itself on the host, or a copy of a device view, kept alive by `storage`.
TensorView host_readable(const TensorView& view, Tensor& storage);

class ArgChecker {
 public:
  explicit ArgChecker(std::string op) : op_(std::move(op)) {}
  ArgChecker& rank(const char* name, const TensorView& view, int expected);
  ArgChecker& shape(const char* name, const TensorView& view, std::initializer_list<int64_t> expected);
  ArgChecker& dtype(const char* name, const TensorView& view, DType expected);
  ArgChecker& dtype_in(const char* name, const TensorView& view, std::initializer_list<DType> allowed);
  // An output beside inputs of dtype `input`: the same dtype, or bf16 beside f32 inputs (the f32
  // result rounded once as it is stored: what bf16 training's products read).
  ArgChecker& output_dtype(const char* name, const TensorView& view, DType input);
  ArgChecker& contiguous(const char* name, const TensorView& view);
  ArgChecker& inner_contiguous(const char* name, const TensorView& view);  // last axis stride 1
  ArgChecker& present(const char* name, const TensorView& view);
  ArgChecker& positive(const char* name, double value);
  ArgChecker& at_least(const char* name, int64_t value, int64_t minimum);
  // A free-form condition; the message follows "op: ".
  template <class... Parts>
  ArgChecker& require(bool condition, const Parts&... parts) {
    if (!condition) throw_error(op_, ": ", parts...);
    return *this;
  }

 private:
  std::string op_;
};

}  // namespace lathe
