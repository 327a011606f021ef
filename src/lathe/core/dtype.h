// Element types of tensors. f64 exists for references and tests; kernels compute in f32 or bf16.
// i16, i8 and boolean (one byte, 0 or 1) exist so integer tensors of Hugging Face checkpoints load.
#pragma once

#include <cstdint>
#include <string>

#include "lathe/core/half.h"

namespace lathe {

enum class DType : uint8_t { f64, f32, bf16, f16, i64, i32, u16, u8, i16, i8, boolean };

int dtype_size(DType dtype);
const char* dtype_name(DType dtype);
// Parses "f32", "bf16", ... ; throws lathe::Error naming the accepted values otherwise.
DType parse_dtype(const std::string& name);
bool is_floating(DType dtype);

// The DType of a C++ element type, for typed access checks.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<f16>() { return DType::f16; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::u16; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::i16; }
template <> constexpr DType dtype_of<int8_t>() { return DType::i8; }

}  // namespace lathe
