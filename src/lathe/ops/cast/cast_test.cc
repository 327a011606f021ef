// cast beyond the registered problem's contract tests: f32 -> bf16 rounding at and around the
// ties (nearest-even, checked against the rule on the bit patterns), exact widening back, equality
// with core's convert() (the host path of autograd::converted), and validation errors.
#include "lathe/ops/cast/cast.h"

#include <gtest/gtest.h>

#include <cstring>

#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe {
namespace {

float from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Nearest-even on the bit pattern: the upper half, plus one when the lower half is above the
// midpoint, or at it with an odd upper half.
uint16_t expected_bf16(uint32_t bits) {
  const uint32_t upper = bits >> 16, lower = bits & 0xffffu;
  return static_cast<uint16_t>(upper + ((lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) ? 1u : 0u));
}

TEST(Cast, RoundsToNearestEvenAtAndAroundTies) {
  std::vector<uint32_t> patterns;
  for (uint32_t upper : {0x3f80u, 0x3f81u, 0xbf80u, 0xbf81u, 0x4049u, 0x0001u})
    for (uint32_t lower : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) patterns.push_back(upper << 16 | lower);
  const auto n = static_cast<int64_t>(patterns.size());
  Tensor in = Tensor::empty({n}, DType::f32), out = Tensor::empty({n}, DType::bf16);
  for (int64_t i = 0; i < n; ++i) in.ptr<float>()[i] = from_bits(patterns[i]);
  cast({in, out});
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(static_cast<const uint16_t*>(out.view().data)[i], expected_bf16(patterns[i]))
        << std::hex << "f32 bits 0x" << patterns[i];
  // Widening is exact: each bf16 comes back as its f32 value, lower half zero.
  Tensor back = Tensor::empty({n}, DType::f32);
  cast({out, back});
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, back.ptr<float>() + i, sizeof bits);
    EXPECT_EQ(bits, static_cast<uint32_t>(expected_bf16(patterns[i])) << 16);
  }
}

TEST(Cast, GivesCoreConvertsBits) {
  const uint64_t seed = test_seed();
  Tensor in = Tensor::empty({10007}, DType::f32), out = Tensor::empty({10007}, DType::bf16);
  fill_uniform(in, seed, -100, 100, 1);
  cast({in, out});
  const Tensor expected = convert(in, DType::bf16);
  EXPECT_EQ(std::memcmp(out.view().data, expected.view().data, 10007 * sizeof(uint16_t)), 0) << "seed=" << seed;
}

TEST(Cast, RejectsBadArguments) {
  Tensor in = Tensor::zeros({4}, DType::f32), wrong_shape = Tensor::empty({5}, DType::bf16);
  EXPECT_THROW(cast({in, wrong_shape}), Error);
  Tensor f64 = Tensor::empty({4}, DType::f64);
  EXPECT_THROW(cast({in, f64}), Error);
  Tensor matrix = Tensor::zeros({4, 4}, DType::f32), column_out = Tensor::empty({4}, DType::bf16);
  EXPECT_THROW(cast({matrix.view().select(1, 0), column_out}), Error);  // a strided column
}

}  // namespace
}  // namespace lathe
