#include "lathe/core/half.h"

namespace lathe {

f16 float_to_f16(float value) {
  uint32_t bits = float_bits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return f16{static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu))};
  if (magnitude >= 0x477ff000u) return f16{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (magnitude < 0x38800000u) {
    // Result is subnormal (or zero) in f16: scale into the integer grid of 2^-24 and round.
    if (magnitude < 0x33000000u) return f16{sign};  // below half the smallest subnormal
    uint32_t exponent = magnitude >> 23;
    uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent;  // bits dropped so the unit becomes 2^-24
    uint32_t truncated = mantissa >> shift;
    uint32_t remainder = mantissa & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (truncated & 1u))) truncated++;
    return f16{static_cast<uint16_t>(sign | truncated)};
  }
  uint32_t rebased = magnitude - ((127u - 15u) << 23);
  uint32_t rounding_bias = 0xfffu + ((rebased >> 13) & 1u);
  return f16{static_cast<uint16_t>(sign | ((rebased + rounding_bias) >> 13))};
}

float f16_to_float(f16 value) {
  uint32_t sign = static_cast<uint32_t>(value.bits & 0x8000u) << 16;
  uint32_t exponent = (value.bits >> 10) & 0x1fu;
  uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1f) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return float_from_bits(sign);
    // Subnormal: value = mantissa * 2^-24, exact in float.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return sign ? -magnitude : magnitude;
  }
  return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace lathe
