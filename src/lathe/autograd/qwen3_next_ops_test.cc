// qwen3_next_ops: gather_rows' rows against the weight's own, linear over two gathers that cover a
// weight against the product with the whole weight (the Qwen3-Next qkvz split), their gradients
// against finite differences and the f32 tape against the f64 one, and the bf16 copy's rows.
#include "lathe/autograd/qwen3_next_ops.h"

#include <gtest/gtest.h>

#include <vector>

#include "autograd_op_checks.h"
#include "lathe/autograd/ops.h"
#include "test_seed.h"

namespace lathe::autograd {
namespace {

// Rows 4, 0, 2 then 1, 3 of a (5, in) weight: together a permutation, each part out of order.
const std::vector<int64_t> kFirst = {4, 0, 2}, kSecond = {1, 3};

TEST(GatherRows, CopiesTheRowsInTheGivenOrder) {
  const uint64_t seed = test_seed();
  const Tensor w = random({5, 7}, seed, 1);
  Tape tape(Precision::reference_f64, false);
  Var out = gather_rows(tape, make_var(w), kFirst);
  ASSERT_EQ(out->value.shape(), Shape({3, 7}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 7; ++j)
      ASSERT_EQ(out->value.ptr<double>()[i * 7 + j], w.ptr<double>()[kFirst[i] * 7 + j]) << i << "," << j;
}

// [x W[first]^T, x W[second]^T] side by side.
Var two_gathered_products(Tape& tape, const std::vector<Var>& v) {
  Var a = linear(tape, v[0], gather_rows(tape, v[1], kFirst));
  Var b = linear(tape, v[0], gather_rows(tape, v[1], kSecond));
  return add(tape, reshape(tape, a, {a->value.numel()}),
             reshape(tape, linear(tape, b, v[2]), {a->value.numel()}));  // b mixed back to a's width
}

TEST(GatherRows, BackwardMatchesFiniteDifferencesAndReference) {
  const uint64_t seed = test_seed();
  // x (4, 7), weight (5, 7), mix (3, 2): every row of the weight reaches the loss by one gather.
  check_finite_differences({random({4, 7}, seed, 1), random({5, 7}, seed, 2), random({3, 2}, seed, 3)},
                           random({12}, seed, 4), two_gathered_products, seed);
  check_fast_matches_reference({random({33, 7}, seed, 5), random({5, 7}, seed, 6), random({3, 2}, seed, 7)}, {99},
                               two_gathered_products, seed, 1e-5);
}

TEST(GatherRows, GathersTheBf16Copy) {
  const uint64_t seed = test_seed();
  Var w = make_var(random({5, 7}, seed, 1, 1.0, DType::f32));
  w->value_bf16 = convert(w->value, DType::bf16);
  Tape tape(Precision::fast, false);
  Var out = gather_rows(tape, w, kSecond);
  ASSERT_TRUE(out->value_bf16.defined());
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 7; ++j)
      ASSERT_EQ(read_element(out->value_bf16, i * 7 + j), read_element(w->value_bf16, kSecond[i] * 7 + j));
}

}  // namespace
}  // namespace lathe::autograd
