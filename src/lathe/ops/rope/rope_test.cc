// RoPE-specific tests: the reference backward against finite differences of the reference
// forward, rotation properties (norm-preserving pairs, identity at position 0, relative
// position), the llama3 frequency rule re-derived from its definition, accuracy at large
// positions, in-place calls, and validation errors.
#include "lathe/ops/rope/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe {
namespace {

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream, double low = -1,
                     double high = 1) {
  Tensor t = Tensor::empty(shape, dtype);
  fill_uniform(t, seed, low, high, stream);
  return t;
}

RopeParams llama32_params() {
  RopeParams params;
  params.theta = 500000.0;
  params.scaling = {RopeScalingType::llama3, 32.0, 1.0, 4.0, 8192.0};
  return params;
}

TEST(Rope, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  for (bool partial : {false, true}) {
    const Shape shape{2, 3, 2, 10};
    RopeParams params = llama32_params();
    params.rotary_dim = partial ? 6 : 0;
    params.position_offset = 5;
    Tensor x = random_tensor(shape, DType::f64, seed, 1), weight = random_tensor(shape, DType::f64, seed, 2);
    Tensor y = Tensor::empty(shape, DType::f64), dx = Tensor::empty(shape, DType::f64);
    // loss = sum(weight * rope(x)), so dloss/dx = rope_backward(dy = weight).
    rope_backward_reference<double>({weight, TensorView{}, dx, params});
    auto loss = [&](const Tensor& input) {
      rope_reference<double>({input, TensorView{}, y, params});
      double sum = 0;
      for (int64_t i = 0; i < y.numel(); ++i) sum += y.ptr<double>()[i] * weight.ptr<double>()[i];
      return sum;
    };
    const double h = 1e-6;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = x.ptr<double>()[i];
      x.ptr<double>()[i] = saved + h;
      const double plus = loss(x);
      x.ptr<double>()[i] = saved - h;
      const double minus = loss(x);
      x.ptr<double>()[i] = saved;
      EXPECT_NEAR(dx.ptr<double>()[i], (plus - minus) / (2 * h), 1e-8) << "element " << i << " seed=" << seed;
    }
  }
}

TEST(Rope, PreservesPairNormsAndIsIdentityAtPositionZero) {
  const uint64_t seed = test_seed();
  const Shape shape{2, 50, 3, 32};
  Tensor x = random_tensor(shape, DType::f32, seed, 3, -2, 2), y = Tensor::empty(shape, DType::f32);
  RopeParams params = llama32_params();
  params.rotary_dim = 24;
  params.position_offset = 123456;
  rope({x, TensorView{}, y, params});
  const float* in = x.ptr<float>();
  const float* out = y.ptr<float>();
  for (int64_t base = 0; base < x.numel(); base += 32) {
    for (int i = 0; i < 12; ++i) {
      const double before = std::hypot(in[base + i], in[base + i + 12]);
      const double after = std::hypot(out[base + i], out[base + i + 12]);
      ASSERT_NEAR(after, before, 1e-6 * (1 + before)) << "pair " << i << " at " << base << " seed=" << seed;
    }
    for (int i = 24; i < 32; ++i) ASSERT_EQ(out[base + i], in[base + i]) << "pass-through dim " << i;
  }
  // Position 0: cos = 1 and sin = 0 exactly.
  Tensor zero_positions = Tensor::zeros({50}, DType::i64);
  params.position_offset = 0;
  rope({x, zero_positions, y, params});
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(out[i], in[i]) << "element " << i << " seed=" << seed;
}

// dot(rope(q, m), rope(k, n)) depends only on m - n.
TEST(Rope, AttentionScoreDependsOnlyOnRelativePosition) {
  const uint64_t seed = test_seed();
  const int64_t head_dim = 64;
  Tensor q = random_tensor({1, 1, 1, head_dim}, DType::f32, seed, 4),
         k = random_tensor({1, 1, 1, head_dim}, DType::f32, seed, 5);
  auto score = [&](int64_t m, int64_t n) {
    Tensor rq = Tensor::empty(q.shape(), DType::f32), rk = Tensor::empty(k.shape(), DType::f32);
    RopeParams params = llama32_params();
    params.position_offset = m;
    rope({q, TensorView{}, rq, params});
    params.position_offset = n;
    rope({k, TensorView{}, rk, params});
    double dot = 0;
    for (int64_t i = 0; i < head_dim; ++i) dot += double(rq.ptr<float>()[i]) * rk.ptr<float>()[i];
    return dot;
  };
  for (int64_t distance : {0, 1, 7, 300, 5000}) {
    const double base = score(distance + 3, 3);
    for (int64_t shift : {1, 1000, 65536, 200000})
      EXPECT_NEAR(score(distance + 3 + shift, 3 + shift), base, 2e-5 * head_dim)
          << "distance " << distance << " shift " << shift << " seed=" << seed;
  }
  EXPECT_GT(std::fabs(score(10, 3) - score(3, 3)), 1e-3) << "different distances should give different scores";
}

// YaRN frequencies and attention factor against values printed by transformers 5.24
// (ROPE_INIT_FUNCTIONS["yarn"], computed in float32 there, hence the 2e-7 relative bound):
// DeepSeek-V3's rope_scaling (factor 40 over 4096, mscale = mscale_all_dim = 1: factor 1) and
// GPT-OSS's defaults (theta 150000, factor 32 over 4096, truncate false: factor 0.1 ln 32 + 1).
TEST(Rope, YarnMatchesTransformers) {
  const int64_t pairs[] = {0, 5, 10, 15, 20, 25, 31};
  RopeScaling v3{.type = RopeScalingType::yarn, .factor = 40.0, .original_max_position_embeddings = 4096};
  const double v3_expected[] = {1.0,
                                0.23713736236095428,
                                0.05623412877321243,
                                0.0083345090970397,
                                0.0007905694073997438,
                                1.8747354260995053e-05,
                                3.3338035336782923e-06};
  std::vector<double> v3_inv = rope_inverse_frequencies(64, 10000.0, v3);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(v3_inv[pairs[i]], v3_expected[i], 2e-7 * v3_expected[i]) << pairs[i];
  EXPECT_DOUBLE_EQ(yarn_attention_factor(40.0, 1.0, 1.0), 1.0);
  RopeScaling oss{
      .type = RopeScalingType::yarn, .factor = 32.0, .original_max_position_embeddings = 4096, .truncate = false};
  const double oss_expected[] = {1.0,
                                 0.15532298386096954,
                                 0.019334999844431877,
                                 0.00105260219424963,
                                 1.818833698052913e-05,
                                 2.8250667583051836e-06,
                                 3.023511396804679e-07};
  std::vector<double> oss_inv = rope_inverse_frequencies(64, 150000.0, oss);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(oss_inv[pairs[i]], oss_expected[i], 2e-7 * oss_expected[i]) << pairs[i];
  EXPECT_NEAR(yarn_attention_factor(32.0, 0.0, 0.0), 1.3465735902799727, 1e-15);
  EXPECT_NEAR(yarn_mscale(40.0, 0.707), 0.1 * 0.707 * std::log(40.0) + 1.0, 1e-15);
}

// The interleaved layout rotates (2i, 2i+1) exactly as the rotate-half layout rotates (i, i+h):
// permuting the input into rotate-half order, rotating, and permuting back gives the same result.
// The attention factor scales every rotated value (and only those).
TEST(Rope, InterleavedEqualsPermutedRotateHalfAndFactorScales) {
  const Shape shape{2, 5, 3, 12};
  Tensor x = random_tensor(shape, DType::f32, test_seed(), 1);
  RopeParams params;
  params.rotary_dim = 8;
  params.interleaved = true;
  params.attention_factor = 1.25;
  params.position_offset = 17;
  Tensor y = Tensor::empty(shape, DType::f32);
  rope({x, TensorView{}, y, params});
  // the same data permuted: rotate-half pair (i, i + 4) <- interleaved pair (2i, 2i + 1)
  Tensor permuted = random_tensor(shape, DType::f32, test_seed(), 1), expected = Tensor::empty(shape, DType::f32);
  const int64_t rows = 2 * 5 * 3;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < 4; ++i) {
      permuted.ptr<float>()[r * 12 + i] = x.ptr<float>()[r * 12 + 2 * i];
      permuted.ptr<float>()[r * 12 + 4 + i] = x.ptr<float>()[r * 12 + 2 * i + 1];
    }
  RopeParams half = params;
  half.interleaved = false;
  rope({permuted, TensorView{}, expected, half});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(y.ptr<float>()[r * 12 + 2 * i], expected.ptr<float>()[r * 12 + i], 1e-6);
      EXPECT_NEAR(y.ptr<float>()[r * 12 + 2 * i + 1], expected.ptr<float>()[r * 12 + 4 + i], 1e-6);
    }
    for (int64_t d = 8; d < 12; ++d) EXPECT_EQ(y.ptr<float>()[r * 12 + d], x.ptr<float>()[r * 12 + d]);
  }
  // Pair norms grow by exactly the factor.
  for (int64_t i = 0; i < 4; ++i) {
    const float* in = x.ptr<float>() + 7 * 12;
    const float* out = y.ptr<float>() + 7 * 12;
    EXPECT_NEAR(std::hypot(out[2 * i], out[2 * i + 1]), 1.25 * std::hypot(in[2 * i], in[2 * i + 1]), 1e-5);
  }
}

// The llama3 rule re-derived from its definition (three wavelength regimes).
TEST(Rope, Llama3InverseFrequenciesFollowTheDefinition) {
  const int64_t rotary_dim = 64;
  const double theta = 500000.0, factor = 32.0, low = 1.0, high = 4.0, original = 8192.0;
  std::vector<double> scaled =
      rope_inverse_frequencies(rotary_dim, theta, {RopeScalingType::llama3, factor, low, high, original});
  std::vector<double> plain = rope_inverse_frequencies(rotary_dim, theta);
  ASSERT_EQ(scaled.size(), 32u);
  int unchanged = 0, divided = 0, smoothed = 0;
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    const double base = 1.0 / std::pow(theta, static_cast<double>(2 * i) / rotary_dim);
    EXPECT_NEAR(plain[i], base, 1e-15 * base);
    const double wavelength = 2 * std::numbers::pi / base;
    double expected;
    if (wavelength < original / high) {  // high frequency: kept
      expected = base;
      ++unchanged;
    } else if (wavelength > original / low) {  // low frequency: slowed by factor
      expected = base / factor;
      ++divided;
    } else {  // linear blend in 1/wavelength between the two
      const double blend = (original / wavelength - low) / (high - low);
      expected = base * (blend + (1 - blend) / factor);
      ++smoothed;
      EXPECT_LT(expected, base);
      EXPECT_GT(expected, base / factor);
    }
    EXPECT_NEAR(scaled[i], expected, 1e-14 * expected) << "pair " << i;
  }
  EXPECT_GT(unchanged, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);
}

// Linear scaling divides every frequency; proportional RoPE (transformers'
// _compute_proportional_rope_parameters) keeps theta^(-2i/head_dim) for the first
// int(p * head_dim // 2) pairs and zeros the rest, which then pass through unrotated.
TEST(Rope, LinearAndProportionalFollowTheDefinition) {
  const int64_t head_dim = 16;
  const double theta = 1e6, factor = 8.0;
  std::vector<double> linear =
      rope_inverse_frequencies(head_dim, theta, {.type = RopeScalingType::linear, .factor = factor});
  RopeScaling proportional{.type = RopeScalingType::linear, .factor = 2.0, .rotated_pairs = 2};  // p = 0.25
  std::vector<double> partial = rope_inverse_frequencies(head_dim, theta, proportional);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double base = 1.0 / std::pow(theta, static_cast<double>(2 * i) / head_dim);
    EXPECT_NEAR(linear[i], base / factor, 1e-15 * base);
    if (i < 2) {
      EXPECT_NEAR(partial[i], base / 2.0, 1e-15 * base) << "pair " << i;
    } else {
      EXPECT_EQ(partial[i], 0.0) << "pair " << i;
    }
  }
  Tensor x = random_tensor({1, 5, 2, head_dim}, DType::f32, test_seed(), 0), y = Tensor::empty(x.shape(), DType::f32);
  RopeParams params;
  params.theta = theta;
  params.position_offset = 37;
  params.scaling = proportional;
  rope({x, TensorView{}, y, params});
  for (int64_t row = 0; row < 10; ++row)
    for (int64_t d = 0; d < head_dim; ++d) {
      const bool rotated = d % (head_dim / 2) < 2;
      const float in = x.ptr<float>()[row * head_dim + d], out = y.ptr<float>()[row * head_dim + d];
      if (rotated) {
        EXPECT_NE(out, in) << "row " << row << " dim " << d;
      } else {
        EXPECT_EQ(out, in) << "row " << row << " dim " << d;
      }
    }
}

TEST(Rope, FastPathIsAccurateAtLargePositions) {
  const uint64_t seed = test_seed();
  const Shape shape{1, 64, 2, 128};
  Tensor x = random_tensor(shape, DType::f32, seed, 6, -2, 2);
  Tensor positions = random_tensor({64}, DType::i64, seed, 7, 0, 1e6);
  Tensor y = Tensor::empty(shape, DType::f32), expected = Tensor::empty(shape, DType::f64);
  RopeParams params;
  params.theta = 1e6;
  params.position_offset = 1000;
  rope({x, positions, y, params});
  rope_reference<double>({x, positions, expected, params});
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_NEAR(y.ptr<float>()[i], expected.ptr<double>()[i], 2e-6) << "element " << i << " seed=" << seed;
}

TEST(Rope, InPlaceEqualsOutOfPlaceAndBackwardInverts) {
  const uint64_t seed = test_seed();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Shape shape{2, 9, 3, 40};
    RopeParams params = llama32_params();
    params.rotary_dim = 26;
    Tensor x = random_tensor(shape, dtype, seed, 8), y = Tensor::empty(shape, dtype);
    rope({x, TensorView{}, y, params});
    Tensor in_place = convert(x, dtype);
    rope({in_place, TensorView{}, in_place, params});
    std::vector<double> a = to_vector<double>(y), b = to_vector<double>(in_place);
    ASSERT_EQ(a, b) << dtype_name(dtype) << " seed=" << seed;
    if (dtype == DType::f32) {
      Tensor back = Tensor::empty(shape, dtype);
      rope_backward({y, TensorView{}, back, params});
      std::vector<double> original = to_vector<double>(x), restored = to_vector<double>(back);
      for (size_t i = 0; i < original.size(); ++i) ASSERT_NEAR(restored[i], original[i], 1e-6) << i;
    }
  }
}

TEST(Rope, RejectsBadArguments) {
  Tensor x = Tensor::empty({1, 4, 2, 8}, DType::f32), y = Tensor::empty({1, 4, 2, 8}, DType::f32);
  RopeParams params;
  params.rotary_dim = 5;
  EXPECT_THROW(rope({x, TensorView{}, y, params}), Error);  // odd rotary_dim
  params.rotary_dim = 10;
  EXPECT_THROW(rope({x, TensorView{}, y, params}), Error);  // rotary_dim > head_dim
  params.rotary_dim = 0;
  Tensor long_positions = Tensor::empty({5}, DType::i64), float_positions = Tensor::empty({4}, DType::f32);
  Tensor bf16_y = Tensor::empty({1, 4, 2, 8}, DType::bf16), narrow_y = Tensor::empty({1, 4, 2, 6}, DType::f32);
  Tensor rank3_x = Tensor::empty({4, 2, 8}, DType::f32);
  EXPECT_THROW(rope({x, long_positions, y, params}), Error);       // positions length
  EXPECT_THROW(rope({x, float_positions, y, params}), Error);      // positions dtype
  EXPECT_THROW(rope({x, TensorView{}, bf16_y, params}), Error);    // y dtype
  EXPECT_THROW(rope({x, TensorView{}, narrow_y, params}), Error);  // y shape
  EXPECT_THROW(rope({rank3_x, TensorView{}, y, params}), Error);   // rank
  params.theta = 0;
  EXPECT_THROW(rope({x, TensorView{}, y, params}), Error);
  params.theta = 10000;
  params.scaling = {RopeScalingType::llama3, 8.0, 4.0, 1.0, 8192.0};  // high <= low
  EXPECT_THROW(rope({x, TensorView{}, y, params}), Error);
  try {
    rope_backward({x, TensorView{}, narrow_y, RopeParams{}});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("rope_backward: dx"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace lathe
