#include "lathe/core/dtype.h"

#include "lathe/core/error.h"

namespace lathe {

int dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: case DType::u16: case DType::i16: return 2;
    case DType::u8: case DType::i8: case DType::boolean: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
    case DType::u16: return "u16";
    case DType::u8: return "u8";
    case DType::i16: return "i16";
    case DType::i8: return "i8";
    case DType::boolean: return "bool";
  }
  return "?";
}

DType parse_dtype(const std::string& name) {
  for (DType dtype : {DType::f64, DType::f32, DType::bf16, DType::f16, DType::i64, DType::i32, DType::u16, DType::u8,
                      DType::i16, DType::i8, DType::boolean})
    if (name == dtype_name(dtype)) return dtype;
  throw_error("unknown dtype '", name, "' (expected one of f64, f32, bf16, f16, i64, i32, u16, u8, i16, i8, bool)");
}

bool is_floating(DType dtype) {
  return dtype == DType::f64 || dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
}

}  // namespace lathe
