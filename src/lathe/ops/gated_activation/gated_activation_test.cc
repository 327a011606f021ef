// Gated-MLP-specific tests: reference backward against finite differences of the reference
// forward (both activations), activation properties derived independently (limits, the exact
// erf GELU, SiLU's closed form), strided fused gate_up views, and validation errors.
#include "lathe/ops/gated_activation/gated_activation.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/core/half.h"
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

TEST(GatedActivation, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  for (GatedActivation act : {GatedActivation::silu, GatedActivation::gelu_tanh}) {
    const Shape shape{3, 7};
    Tensor gate = random_tensor(shape, DType::f64, seed, 1, -4, 4), up = random_tensor(shape, DType::f64, seed, 2);
    Tensor weight = random_tensor(shape, DType::f64, seed, 3);
    Tensor out = Tensor::empty(shape, DType::f64), dgate = Tensor::empty(shape, DType::f64),
           dup = Tensor::empty(shape, DType::f64);
    // loss = sum(weight * out): dout = weight.
    gated_activation_backward_reference<double>({gate, up, weight, dgate, dup, act});
    auto loss = [&] {
      gated_activation_reference<double>({gate, up, out, act});
      double sum = 0;
      for (int64_t i = 0; i < out.numel(); ++i) sum += out.ptr<double>()[i] * weight.ptr<double>()[i];
      return sum;
    };
    const double h = 1e-6;
    for (auto [input, gradient, name] : {std::tuple{&gate, &dgate, "gate"}, {&up, &dup, "up"}}) {
      for (int64_t i = 0; i < input->numel(); ++i) {
        double& value = input->ptr<double>()[i];
        const double saved = value;
        value = saved + h;
        const double plus = loss();
        value = saved - h;
        const double minus = loss();
        value = saved;
        EXPECT_NEAR(gradient->ptr<double>()[i], (plus - minus) / (2 * h), 1e-8)
            << gated_activation_name(act) << " d" << name << " element " << i << " seed=" << seed;
      }
    }
  }
}

// Runs the fast path on one row of gate values with up = 1.
std::vector<float> activate(GatedActivation act, const std::vector<float>& gate_values) {
  const int64_t n = static_cast<int64_t>(gate_values.size());
  Tensor gate = Tensor::empty({1, n}, DType::f32), up = Tensor::empty({1, n}, DType::f32),
         out = Tensor::empty({1, n}, DType::f32);
  write_from_vector(gate.view(), gate_values);
  fill_value(up, 1.0);
  gated_activation({gate, up, out, act});
  return to_vector<float>(out);
}

TEST(GatedActivation, ActivationsMatchIndependentDefinitions) {
  const uint64_t seed = test_seed();
  std::vector<float> g(257);
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(-8.0 + 16.0 * uniform_at(seed, 9, i));
  std::vector<float> silu = activate(GatedActivation::silu, g), gelu = activate(GatedActivation::gelu_tanh, g);
  std::vector<float> glu = activate(GatedActivation::sigmoid, g);
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    EXPECT_NEAR(silu[i], x / (1 + std::exp(-x)), 1e-6 * (1 + std::fabs(x))) << "silu(" << x << ") seed=" << seed;
    // sigmoid(x) = (1 + tanh(x / 2)) / 2: another formula than the kernels' exp.
    EXPECT_NEAR(glu[i], 0.5 * (1 + std::tanh(x / 2)), 1e-6) << "sigmoid(" << x << ") seed=" << seed;
    // The tanh form approximates the exact GELU x * Phi(x) to within ~1e-3.
    EXPECT_NEAR(gelu[i], 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))), 2e-3) << "gelu(" << x << ") seed=" << seed;
  }
  // Limits: act(0) = 0, act(x) -> x for large x, -> 0 for very negative x.
  std::vector<float> special = {0.0f, 30.0f, -30.0f};
  for (GatedActivation act : {GatedActivation::silu, GatedActivation::gelu_tanh}) {
    std::vector<float> y = activate(act, special);
    EXPECT_EQ(y[0], 0.0f) << gated_activation_name(act);
    EXPECT_NEAR(y[1], 30.0f, 1e-5) << gated_activation_name(act);
    EXPECT_NEAR(y[2], 0.0f, 1e-10) << gated_activation_name(act);
  }
  // The GLU's gate: sigmoid(0) = 1/2, -> 1 and -> 0 at the ends.
  const std::vector<float> y = activate(GatedActivation::sigmoid, special);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_NEAR(y[1], 1.0f, 1e-7);
  EXPECT_NEAR(y[2], 0.0f, 1e-12);
}

TEST(GatedActivation, FusedStridedViewsEqualContiguousTensors) {
  const uint64_t seed = test_seed();
  const int64_t rows = 5, ffn = 37;
  for (GatedActivation act : {GatedActivation::silu, GatedActivation::gelu_tanh, GatedActivation::sigmoid}) {
    Tensor gate_up = random_tensor({rows, 2 * ffn}, DType::f32, seed, 10, -4, 4);
    Tensor dout = random_tensor({rows, ffn}, DType::f32, seed, 11);
    TensorView gate_view = gate_up.view().slice(1, 0, ffn), up_view = gate_up.view().slice(1, ffn, 2 * ffn);
    Tensor gate = convert(gate_view, DType::f32), up = convert(up_view, DType::f32);
    Tensor strided_out = Tensor::empty({rows, ffn}, DType::f32), out = Tensor::empty({rows, ffn}, DType::f32);
    gated_activation({gate_view, up_view, strided_out, act});
    gated_activation({gate, up, out, act});
    EXPECT_EQ(to_vector<float>(strided_out), to_vector<float>(out)) << "seed=" << seed;
    Tensor dgate_up = Tensor::empty({rows, 2 * ffn}, DType::f32);
    Tensor dgate = Tensor::empty({rows, ffn}, DType::f32), dup = Tensor::empty({rows, ffn}, DType::f32);
    gated_activation_backward(
        {gate_view, up_view, dout, dgate_up.view().slice(1, 0, ffn), dgate_up.view().slice(1, ffn, 2 * ffn), act});
    gated_activation_backward({gate, up, dout, dgate, dup, act});
    EXPECT_EQ(to_vector<float>(dgate_up.view().slice(1, 0, ffn)), to_vector<float>(dgate)) << "seed=" << seed;
    EXPECT_EQ(to_vector<float>(dgate_up.view().slice(1, ffn, 2 * ffn)), to_vector<float>(dup)) << "seed=" << seed;
  }
}

// bf16 outputs from f32 inputs (bf16 training's form) are the f32 outputs rounded to nearest even,
// bit for bit, on every instruction set: the training step's numbers do not change with the form.
TEST(GatedActivation, Bf16OutputsAreTheF32OutputsRounded) {
  const uint64_t seed = test_seed();
  const int64_t rows = 6, ffn = 45;
  const auto rounded = [](const Tensor& f32) {
    std::vector<float> values = to_vector<float>(f32);
    for (float& value : values) value = round_to_bf16(value);
    return values;
  };
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_available(isa)) continue;
    const Dispatch dispatch{isa_name(isa)};
    for (GatedActivation act : {GatedActivation::silu, GatedActivation::gelu_tanh, GatedActivation::sigmoid}) {
      Tensor gate = random_tensor({rows, ffn}, DType::f32, seed, 30, -6, 6),
             up = random_tensor({rows, ffn}, DType::f32, seed, 31);
      Tensor dout = random_tensor({rows, ffn}, DType::f32, seed, 32);
      Tensor out = Tensor::empty({rows, ffn}, DType::f32), out16 = Tensor::empty({rows, ffn}, DType::bf16);
      gated_activation({gate, up, out, act}, dispatch);
      gated_activation({gate, up, out16, act}, dispatch);
      EXPECT_EQ(to_vector<float>(out16), rounded(out))
          << isa_name(isa) << " " << gated_activation_name(act) << " seed=" << seed;
      Tensor dgate = Tensor::empty({rows, ffn}, DType::f32), dup = Tensor::empty({rows, ffn}, DType::f32);
      Tensor dgate16 = Tensor::empty({rows, ffn}, DType::bf16), dup16 = Tensor::empty({rows, ffn}, DType::bf16);
      gated_activation_backward({gate, up, dout, dgate, dup, act}, dispatch);
      gated_activation_backward({gate, up, dout, dgate16, dup16, act}, dispatch);
      EXPECT_EQ(to_vector<float>(dgate16), rounded(dgate)) << isa_name(isa) << " seed=" << seed;
      EXPECT_EQ(to_vector<float>(dup16), rounded(dup)) << isa_name(isa) << " seed=" << seed;
    }
  }
}

// Large gate values (a deep residual stream, Gemma 4's tiny models at init_std 0.5) saturate tanh
// and exp: the fast backward must stay finite and agree with the float64 reference there.
TEST(GatedActivation, BackwardIsFiniteForSaturatedGates) {
  const uint64_t seed = test_seed();
  const int64_t rows = 7, ffn = 19;
  for (GatedActivation act : {GatedActivation::silu, GatedActivation::gelu_tanh, GatedActivation::sigmoid}) {
    Tensor gate = random_tensor({rows, ffn}, DType::f32, seed, 20, -200, 200);
    Tensor up = random_tensor({rows, ffn}, DType::f32, seed, 21),
           dout = random_tensor({rows, ffn}, DType::f32, seed, 22);
    Tensor dgate = Tensor::empty({rows, ffn}, DType::f32), dup = Tensor::empty({rows, ffn}, DType::f32);
    poison(dgate.view());
    poison(dup.view());
    gated_activation_backward({gate, up, dout, dgate, dup, act});
    Tensor gate64 = convert(gate, DType::f64), up64 = convert(up, DType::f64), dout64 = convert(dout, DType::f64);
    Tensor dgate64 = Tensor::empty({rows, ffn}, DType::f64), dup64 = Tensor::empty({rows, ffn}, DType::f64);
    gated_activation_backward_reference<double>({gate64, up64, dout64, dgate64, dup64, act});
    const std::vector<float> fast = to_vector<float>(dgate);
    const std::vector<double> reference = to_vector<double>(dgate64);
    for (size_t i = 0; i < fast.size(); ++i) {
      ASSERT_TRUE(std::isfinite(fast[i])) << "seed=" << seed << " gate " << gate.ptr<float>()[i];
      EXPECT_NEAR(fast[i], reference[i], 1e-5 * (1 + std::fabs(reference[i]))) << "seed=" << seed;
    }
  }
}

TEST(GatedActivation, RejectsBadArguments) {
  Tensor a = Tensor::empty({4, 8}, DType::f32), b = Tensor::empty({4, 8}, DType::f32),
         c = Tensor::empty({4, 8}, DType::f32);
  Tensor wide = Tensor::empty({4, 9}, DType::f32), bf16_out = Tensor::empty({4, 8}, DType::bf16);
  Tensor f64_in = Tensor::empty({4, 8}, DType::f64), transposed_grad = Tensor::empty({8, 4}, DType::f32);
  Tensor extra = Tensor::empty({4, 8}, DType::f32), bf16_a = Tensor::empty({4, 8}, DType::bf16),
         bf16_b = Tensor::empty({4, 8}, DType::bf16);
  EXPECT_THROW(gated_activation({a, wide, c}), Error);
  EXPECT_THROW(gated_activation({bf16_a, bf16_b, c}), Error);                  // bf16 inputs, an f32 output
  EXPECT_THROW(gated_activation({a, bf16_b, bf16_out}), Error);                // inputs of two dtypes
  EXPECT_THROW(gated_activation_backward({a, b, c, bf16_out, extra}), Error);  // dgate and dup differ
  EXPECT_THROW(gated_activation({f64_in, b, c}), Error);
  EXPECT_THROW(gated_activation({a.view().transpose(0, 1), b.view().transpose(0, 1), c.view().transpose(0, 1)}), Error);
  EXPECT_THROW(gated_activation_backward({a, b, transposed_grad, c, extra}), Error);
  try {
    gated_activation({a, wide, c});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("gated_activation: up"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace lathe
