// bf16/f16 conversions. Oracles: hand-derived round-to-nearest-even cases, exhaustive f16 round
// trips, and the CPU's own F16C conversion instruction (an independent implementation).
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "lathe/core/cpu_features.h"
#include "lathe/core/half.h"
#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe {
namespace {

TEST(Bf16, RoundsToNearestEvenOnTies) {
  // 1 + 2^-8 lies exactly between bf16 neighbours 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  // 1 + 3 * 2^-8 lies between 1 + 2^-7 (odd mantissa 1) and 1 + 2^-6 (even mantissa 2): rounds up.
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  // Just above a tie rounds up.
  EXPECT_EQ(float_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)).bits, 0x3f81);
}

TEST(Bf16, SpecialValues) {
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(-std::numeric_limits<float>::signaling_NaN()))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(INFINITY)), INFINITY);
  EXPECT_EQ(bf16_to_float(float_to_bf16(std::numeric_limits<float>::max())), INFINITY);  // overflow rounds to inf
  EXPECT_EQ(float_to_bf16(-0.0f).bits, 0x8000);
}

TEST(Bf16, RoundTripOfEveryBf16Value) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float value = bf16_to_float(bf16{static_cast<uint16_t>(bits)});
    if (std::isnan(value)) continue;
    ASSERT_EQ(float_to_bf16(value).bits, bits) << "bits=" << bits;
  }
}

TEST(Bf16, ErrorIsAtMostHalfAnUlp) {
  uint64_t seed = test_seed();
  for (uint64_t i = 0; i < 100000; ++i) {
    float value = static_cast<float>((uniform_at(seed, 1, i) - 0.5) * std::ldexp(1.0, static_cast<int>(i % 60) - 30));
    float rounded = round_to_bf16(value);
    float ulp = std::ldexp(1.0f, std::ilogb(value) - 7);
    ASSERT_LE(std::fabs(rounded - value), 0.5f * ulp) << "value=" << value << " seed=" << seed;
  }
}

TEST(F16, RoundTripOfEveryF16Value) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float value = f16_to_float(f16{static_cast<uint16_t>(bits)});
    if (std::isnan(value)) continue;
    ASSERT_EQ(float_to_f16(value).bits, bits) << "bits=" << bits;
  }
}

__attribute__((target("f16c"))) uint16_t hardware_float_to_f16(float value) {
  return static_cast<uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
}

TEST(F16, MatchesTheF16cInstructionOnRandomFloats) {
  if (!cpu_features().f16c) GTEST_SKIP() << "CPU lacks F16C";
  uint64_t seed = test_seed();
  for (uint64_t i = 0; i < 1000000; ++i) {
    // Exponents from deep subnormal to overflow, both signs.
    double magnitude = std::ldexp(uniform_at(seed, 2, i) + 0.5, static_cast<int>(i % 48) - 30);
    float value = static_cast<float>(i % 2 ? -magnitude : magnitude);
    ASSERT_EQ(float_to_f16(value).bits, hardware_float_to_f16(value)) << "value=" << value << " seed=" << seed;
  }
  EXPECT_EQ(float_to_f16(std::numeric_limits<float>::quiet_NaN()).bits & 0x7e00, 0x7e00);
}

}  // namespace
}  // namespace lathe
