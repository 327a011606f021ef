// 16-bit floating point storage types and conversions with round-to-nearest-even.
//   bf16: 1 sign, 8 exponent, 7 mantissa bits (the top half of an IEEE float32).
//   f16:  1 sign, 5 exponent, 10 mantissa bits (IEEE binary16), subnormals supported.
// NaN stays NaN (quiet), infinities stay infinite, overflow rounds to infinity.
#pragma once

#include <cstdint>
#include <cstring>

#include "lathe/core/host_device.h"

namespace lathe {

struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

LATHE_HOST_DEVICE inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

LATHE_HOST_DEVICE inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

LATHE_HOST_DEVICE inline bf16 float_to_bf16(float value) {
  uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((bits >> 16) | 0x0040u)};
  uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return bf16{static_cast<uint16_t>((bits + rounding_bias) >> 16)};
}

LATHE_HOST_DEVICE inline float bf16_to_float(bf16 value) {
  return float_from_bits(static_cast<uint32_t>(value.bits) << 16);
}

f16 float_to_f16(float value);
float f16_to_float(f16 value);

// Rounds a float to the nearest bf16 value and back: the value a bf16 tensor would hold.
inline float round_to_bf16(float value) { return bf16_to_float(float_to_bf16(value)); }

}  // namespace lathe
