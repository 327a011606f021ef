// The bf16 path of the linear op against float64 products of the bf16-rounded operands:
// forward round(x) @ round(W)^T, backward dx = round(g) @ round(W), dW += round(g)^T @ round(x).
// The only remaining difference is the f32 accumulation, so the tolerance is f32's (relative
// 1e-5 of the row's absolute sum), far below bf16's rounding (2^-9 ~ 2e-3), which the check
// against the unrounded product proves the path applied.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lathe/autograd/moe_ops.h"
#include "lathe/autograd/ops.h"
#include "lathe/core/half.h"
#include "lathe/core/rng.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

std::vector<double> rounded(const Tensor& tensor) {
  std::vector<double> values = to_vector<double>(tensor);
  for (double& value : values) value = round_to_bf16(static_cast<float>(value));
  return values;
}

std::vector<float> rounded_floats(const Tensor& tensor) {
  std::vector<float> values = to_vector<float>(tensor);
  for (float& value : values) value = round_to_bf16(value);
  return values;
}

// c (m, n) = a (m, k) @ b^T where b is (n, k) (trans_b) or (k, n); |a| @ |b| into `magnitude`.
std::vector<double> product(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t k, int64_t n,
                            bool trans_a, bool trans_b, std::vector<double>* magnitude) {
  std::vector<double> c(m * n, 0.0);
  magnitude->assign(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) {
        const double left = trans_a ? a[p * m + i] : a[i * k + p];
        const double right = trans_b ? b[j * k + p] : b[p * n + j];
        c[i * n + j] += left * right;
        (*magnitude)[i * n + j] += std::abs(left * right);
      }
  return c;
}

void expect_close(const Tensor& got, const std::vector<double>& want, const std::vector<double>& magnitude,
                  const char* what, uint64_t seed) {
  const std::vector<double> values = to_vector<double>(got);
  ASSERT_EQ(values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(values[i], want[i], 1e-5 * magnitude[i] + 1e-30) << what << "[" << i << "] seed " << seed;
}

TEST(LinearBf16, ProductsUseTheRoundedOperandsWithF32Accumulation) {
  const uint64_t seed = test_seed();
  const int64_t rows = 13, in = 37, out = 19;  // not multiples of any vector width
  Tensor x_value = Tensor::empty({rows, in}, DType::f32), w_value = Tensor::empty({out, in}, DType::f32);
  Tensor grad = Tensor::empty({rows, out}, DType::f32);
  fill_normal(x_value, seed, 0.0, 1.0, 1);
  fill_normal(w_value, seed, 0.0, 1.0, 2);
  fill_normal(grad, seed, 0.0, 1.0, 3);
  Var x = make_var(x_value, true);
  Var weight = make_parameter(w_value, Tensor::zeros({out, in}, DType::f32));
  weight->value_bf16 = convert(w_value, DType::bf16);

  Tape tape;
  Var y = linear(tape, x, weight);
  tape.backward(y, grad);

  const std::vector<double> xr = rounded(x_value), wr = rounded(w_value), gr = rounded(grad);
  std::vector<double> magnitude;
  expect_close(y->value, product(xr, wr, rows, in, out, false, true, &magnitude), magnitude, "y", seed);
  expect_close(x->grad, product(gr, wr, rows, out, in, false, false, &magnitude), magnitude, "dx", seed);
  expect_close(weight->grad, product(gr, xr, out, rows, in, true, false, &magnitude), magnitude, "dweight", seed);

  // The unrounded product differs by far more than the tolerance above: bf16 was really used.
  const std::vector<double> exact =
      product(to_vector<double>(x_value), to_vector<double>(w_value), rows, in, out, false, true, &magnitude);
  double largest_difference = 0;
  const std::vector<double> got = to_vector<double>(y->value);
  for (size_t i = 0; i < exact.size(); ++i)
    largest_difference = std::max(largest_difference, std::abs(got[i] - exact[i]) / magnitude[i]);
  EXPECT_GT(largest_difference, 1e-4) << "seed " << seed;
}

TEST(LinearBf16, WithoutAWeightCopyTheOpStaysF32) {
  const uint64_t seed = test_seed();
  Tensor x_value = Tensor::empty({3, 5}, DType::f32), w_value = Tensor::empty({4, 5}, DType::f32);
  fill_normal(x_value, seed, 0.0, 1.0, 1);
  fill_normal(w_value, seed, 0.0, 1.0, 2);
  Tape tape(Precision::fast, /*recording=*/false);
  Var x = make_var(x_value);
  Var y = linear(tape, x, make_var(w_value));
  EXPECT_FALSE(x->value_bf16.defined());  // no conversion made
  std::vector<double> magnitude;
  const std::vector<double> want =
      product(to_vector<double>(x_value), to_vector<double>(w_value), 3, 5, 4, false, true, &magnitude);
  const std::vector<double> got = to_vector<double>(y->value);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * magnitude[i]) << i;
}

Var bf16_parameter(const Shape& shape, uint64_t seed, uint64_t stream) {
  Tensor value = Tensor::empty(shape, DType::f32);
  fill_normal(value, seed, 0.0, 0.5, stream);
  Var weight = make_parameter(value, Tensor::zeros(shape, DType::f32));
  weight->value_bf16 = convert(value, DType::bf16);
  return weight;
}

void expect_same_bits(const Tensor& got, const Tensor& want, const char* what, uint64_t seed) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(to_vector<float>(got), to_vector<float>(want)) << what << " seed " << seed;
}

// gated_activation with bf16 output between bf16 products (gated_mlp's form in bf16 training):
// the hidden activation is a bf16 value and gate/up get bf16 gradients, and every result is bit
// for bit the composition with an f32 activation, whose values the products round themselves.
TEST(GatedActivationBf16, BetweenBf16ProductsItGivesTheBitsOfTheF32Form) {
  const uint64_t seed = test_seed();
  const int64_t rows = 11, d = 21, ffn = 35;
  Tensor x_value = Tensor::empty({rows, d}, DType::f32), seed_grad = Tensor::empty({rows, d}, DType::f32);
  fill_normal(x_value, seed, 0.0, 1.0, 1);
  fill_normal(seed_grad, seed, 0.0, 1.0, 2);
  struct Run {
    Var x, gate_proj, up_proj, down_proj, hidden, y;
  };
  auto run = [&](DType hidden_dtype) {
    Run r{make_var(x_value, true),
          bf16_parameter({ffn, d}, seed, 3),
          bf16_parameter({ffn, d}, seed, 4),
          bf16_parameter({d, ffn}, seed, 5),
          nullptr,
          nullptr};
    Tape tape;
    Var gate = linear(tape, r.x, r.gate_proj), up = linear(tape, r.x, r.up_proj);
    r.hidden = gated_activation(tape, gate, up, GatedActivation::silu, hidden_dtype);
    r.y = linear(tape, r.hidden, r.down_proj);
    tape.backward(r.y, seed_grad);
    return r;
  };
  const Run f32 = run(DType::f32), bf16 = run(DType::bf16);
  EXPECT_EQ(bf16.hidden->value.dtype(), DType::bf16);
  EXPECT_EQ(bf16.hidden->grad.dtype(), DType::f32);
  EXPECT_EQ(to_vector<float>(bf16.hidden->value), rounded_floats(f32.hidden->value));
  expect_same_bits(bf16.y->value, f32.y->value, "y", seed);
  expect_same_bits(bf16.x->grad, f32.x->grad, "dx", seed);
  expect_same_bits(bf16.gate_proj->grad, f32.gate_proj->grad, "dgate_proj", seed);
  expect_same_bits(bf16.up_proj->grad, f32.up_proj->grad, "dup_proj", seed);
  expect_same_bits(bf16.down_proj->grad, f32.down_proj->grad, "ddown_proj", seed);
}

// A bf16 attention feeding a bf16 o projection: o kept as a bf16 value (no widening) gives the
// bits of the widened form, whose o projection reads the same rounded copy; q, k, v's gradients too.
TEST(AttentionBf16, ABf16OutputGivesTheBitsOfTheWidenedForm) {
  const uint64_t seed = test_seed();
  const int64_t batch = 2, seq = 7, heads = 2, head_dim = 5, d = heads * head_dim, out_width = 6;
  Tensor seed_grad = Tensor::empty({batch * seq, out_width}, DType::f32);
  fill_normal(seed_grad, seed, 0.0, 1.0, 1);
  auto input = [&](uint64_t stream) {
    Tensor value = Tensor::empty({batch, seq, heads, head_dim}, DType::f32);
    fill_normal(value, seed, 0.0, 1.0, stream);
    return make_var(value, true);
  };
  struct Run {
    Var q, k, v, o_proj, attended, y;
  };
  auto run = [&](DType output) {
    Run r{input(2), input(3), input(4), bf16_parameter({out_width, d}, seed, 5), nullptr, nullptr};
    FlashAttentionOptions options;
    options.causal = true;
    Tape tape;
    r.attended = attention(tape, r.q, r.k, r.v, options, DType::bf16, output);
    r.y = linear(tape, reshape(tape, r.attended, {batch * seq, d}), r.o_proj);
    tape.backward(r.y, seed_grad);
    return r;
  };
  const Run widened = run(DType::f32), bf16 = run(DType::bf16);
  EXPECT_EQ(bf16.attended->value.dtype(), DType::bf16);
  EXPECT_FALSE(bf16.attended->value_bf16.defined());
  EXPECT_EQ(bf16.attended->grad.dtype(), DType::f32);
  expect_same_bits(bf16.attended->value, widened.attended->value_bf16, "o", seed);
  expect_same_bits(bf16.y->value, widened.y->value, "y", seed);
  expect_same_bits(bf16.q->grad, widened.q->grad, "dq", seed);
  expect_same_bits(bf16.k->grad, widened.k->grad, "dk", seed);
  expect_same_bits(bf16.v->grad, widened.v->grad, "dv", seed);
  expect_same_bits(bf16.o_proj->grad, widened.o_proj->grad, "do_proj", seed);
}

// moe_permute with bf16 rows feeding a bf16 grouped product: x's bf16 copy permuted, the same bits
// as the grouped product rounding the f32 rows; x's gradient (f32) likewise.
TEST(MoePermuteBf16, Bf16RowsGiveTheBitsOfRoundingTheF32Rows) {
  const uint64_t seed = test_seed();
  const int64_t tokens = 9, d = 19, out = 13, experts = 3, top_k = 2;
  Tensor x_value = Tensor::empty({tokens, d}, DType::f32), ids = Tensor::empty({tokens, top_k}, DType::i32);
  fill_normal(x_value, seed, 0.0, 1.0, 1);
  for (int64_t i = 0; i < tokens * top_k; ++i)
    ids.ptr<int32_t>()[i] = static_cast<int32_t>((i * 7 + i / top_k + seed) % experts);
  Tensor seed_grad = Tensor::empty({tokens * top_k, out}, DType::f32);
  fill_normal(seed_grad, seed, 0.0, 1.0, 2);
  auto run = [&](DType rows, Var* x, Var* weight) {
    *x = make_var(x_value, true);
    *weight = bf16_parameter({experts, out, d}, seed, 3);
    Tape tape;
    PermutedTokens permuted = moe_permute(tape, *x, ids, experts, rows);
    EXPECT_EQ(permuted.rows->value.dtype(), rows);
    Var y = grouped_linear(tape, permuted.rows, *weight, permuted.group_offsets);
    tape.backward(y, seed_grad);
    return y;
  };
  Var x32, w32, x16, w16;
  const Var y32 = run(DType::f32, &x32, &w32), y16 = run(DType::bf16, &x16, &w16);
  expect_same_bits(y16->value, y32->value, "y", seed);
  expect_same_bits(x16->grad, x32->grad, "dx", seed);
  expect_same_bits(w16->grad, w32->grad, "dweight", seed);
}

// A bf16 gradient contribution meeting an f32 one is summed in f32: widen(g1) + g2, one rounding.
TEST(AccumulateGradBf16, ContributionsOfTwoDtypesAreSummedInF32) {
  const uint64_t seed = test_seed();
  Tensor g1 = Tensor::empty({5, 7}, DType::f32), g2 = Tensor::empty({5, 7}, DType::f32);
  fill_normal(g1, seed, 0.0, 1.0, 1);
  fill_normal(g2, seed, 0.0, 1.0, 2);
  const Tensor g1_16 = convert(g1, DType::bf16);
  std::vector<float> want(35);
  const std::vector<double> a = to_vector<double>(g1_16), b = to_vector<double>(g2);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<float>(a[i] + b[i]);  // exact sum, rounded once
  for (bool bf16_first : {true, false}) {
    Var var = make_var(Tensor::zeros({5, 7}, DType::f32), true);
    accumulate_grad(var, bf16_first ? g1_16 : g2, false);  // copied: g1_16 and g2 stay as they are
    accumulate_grad(var, bf16_first ? g2 : g1_16, false);
    ASSERT_EQ(var->grad.dtype(), DType::f32);
    EXPECT_EQ(to_vector<float>(var->grad), want) << "bf16 first: " << bf16_first << " seed " << seed;
  }
  // An op writing its contribution into grad_buffer after a bf16 one gets the widened buffer.
  Var var = make_var(Tensor::zeros({5, 7}, DType::f32), true);
  accumulate_grad(var, g1_16, false);
  bool accumulate = false;
  Tensor& buffer = grad_buffer(var, DType::f32, &accumulate);
  ASSERT_TRUE(accumulate);
  ASSERT_EQ(buffer.dtype(), DType::f32);
  add_tensors(Precision::fast, buffer, g2, buffer);
  EXPECT_EQ(to_vector<float>(var->grad), want) << "grad_buffer after a bf16 contribution, seed " << seed;
}

}  // namespace
}  // namespace lathe::autograd
