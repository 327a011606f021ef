// bf16/f16 conversions. Oracles: hand-derived round-to-nearest-even cases, exhaustive f16 round
// trips, and the CPU's own F16C conversion instruction (an independent implementation).
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lathe/core/bf16_convert.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/half.h"
#include "lathe/core/rng.h"
#include "lathe/core/tensor.h"
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

// convert() of contiguous f32 <-> bf16 tensors takes a vectorised, threaded path: it must round
// every float exactly as float_to_bf16 (checked above) does. Every bf16 high half with low halves
// below, at, just above a tie and at the ends, plus NaNs of both signs: 393,216 elements, split
// over the thread pool. A strided view (the element-wise path) must agree too.
TEST(Bf16, ConvertOfContiguousTensorsMatchesTheScalarRounding) {
  const uint32_t low_halves[] = {0x0000, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234};
  Tensor floats = Tensor::empty({0x10000, 6}, DType::f32);
  float* values = floats.ptr<float>();
  for (uint32_t high = 0; high < 0x10000; ++high)
    for (int j = 0; j < 6; ++j) values[high * 6 + j] = float_from_bits(high << 16 | low_halves[j]);
  const Tensor rounded = convert(floats, DType::bf16);
  const uint16_t* bits = static_cast<const uint16_t*>(rounded.view().data);
  for (int64_t i = 0; i < floats.numel(); ++i) {
    const uint16_t want = float_to_bf16(values[i]).bits;
    if (std::isnan(values[i])) {
      ASSERT_TRUE(std::isnan(bf16_to_float(bf16{bits[i]}))) << "float bits " << float_bits(values[i]);
      ASSERT_EQ(bits[i] & 0x8000, want & 0x8000) << "float bits " << float_bits(values[i]);
    } else {
      ASSERT_EQ(bits[i], want) << "float bits " << float_bits(values[i]);
    }
  }
  const Tensor widened = convert(rounded, DType::f32);  // exact: bf16 is the top half of a float
  for (int64_t i = 0; i < floats.numel(); ++i) {
    if (!std::isnan(values[i])) {
      ASSERT_EQ(widened.ptr<float>()[i], bf16_to_float(bf16{bits[i]})) << i;
    }
  }
  const Tensor column = convert(floats.view().slice(1, 2, 3), DType::bf16);  // strided: element by element
  for (uint32_t high = 0; high < 0x10000; ++high) {
    if (!std::isnan(values[high * 6 + 2])) {
      ASSERT_EQ(static_cast<const uint16_t*>(column.view().data)[high], bits[high * 6 + 2]) << high;
    }
  }
}

// Each instruction set's span kernel (bf16_convert.h), not only the active one, at every length
// up to a few vectors and at unaligned starts (the tail paths), on the same hard values: every
// output bit pattern must be float_to_bf16's, NaN payloads included; widening is exact.
TEST(Bf16, EachIsaKernelMatchesTheScalarRoundingAtEveryLength) {
  const uint32_t patterns[] = {0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0x00000001, 0x807fffff,
                               0x7f7fffff, 0x7f800000, 0xff800000, 0x7f800001, 0xffc00001, 0x7fbfffff,
                               0x80000000, 0x00000000, 0x3f800000, 0xc0490fdb, 0x0080ffff, 0x47ffffff};
  constexpr int kPatterns = sizeof(patterns) / sizeof(patterns[0]);
  const uint64_t seed = test_seed();
  std::vector<float> source(140);
  for (size_t i = 0; i < source.size(); ++i)
    source[i] = float_from_bits(i % 3 == 0 ? patterns[i / 3 % kPatterns]
                                           : static_cast<uint32_t>(uniform_at(seed, 3, i) * 4294967296.0));
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_available(isa)) continue;
    for (int start = 0; start < 3; ++start)
      for (int64_t n = 0; n <= 67; ++n) {
        std::vector<bf16> rounded(static_cast<size_t>(n) + 1, bf16{0xabcd});  // one guard element
        convert_f32_to_bf16_with(isa, source.data() + start, rounded.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(rounded[i].bits, float_to_bf16(source[start + i]).bits)
              << isa_name(isa) << " n=" << n << " i=" << i << " float bits " << float_bits(source[start + i])
              << " seed=" << seed;
        ASSERT_EQ(rounded[n].bits, 0xabcd) << isa_name(isa) << " wrote past n=" << n;
        std::vector<float> widened(static_cast<size_t>(n) + 1, -7.0f);
        convert_bf16_to_f32_with(isa, rounded.data(), widened.data(), n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(float_bits(widened[i]), static_cast<uint32_t>(rounded[i].bits) << 16)
              << isa_name(isa) << " i=" << i;
        ASSERT_EQ(widened[n], -7.0f) << isa_name(isa) << " wrote past n=" << n;
      }
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
