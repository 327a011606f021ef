// Op-specific checks of short_conv (the contract tests cover the kernels against the float64
// reference, every config, NaN poisoning and determinism): the reference backward against
// central finite differences; decode steps updating the state in place and a split sequence
// equal the whole sequence bitwise (each output is the same sum in the same order); token blocks
// (the backward's lookahead past each block edge) change no output but the summed dweight and
// dbias; thread-count independence of the backward's reductions; argument errors.
#include "lathe/ops/short_conv/short_conv.h"

#include <gtest/gtest.h>

#include "expect_error.h"
#include "finite_difference.h"
#include "sequence_test_util.h"
#include "test_seed.h"

namespace lathe {
namespace {

struct ConvTensors {
  Tensor x, weight, bias, state;
  ConvTensors(int64_t batch, int64_t seq, int64_t channels, int64_t kernel, DType dtype, uint64_t seed) {
    x = random_tensor_for_test({batch, seq, channels}, dtype, seed, 1, -2, 2);
    weight = random_tensor_for_test({channels, kernel}, dtype, seed, 2, -0.5, 0.5);
    bias = random_tensor_for_test({channels}, dtype, seed, 3, -0.5, 0.5);
    state = random_tensor_for_test({batch, kernel - 1, channels}, dtype, seed, 4, -2, 2);
  }
};

TEST(ShortConv, ReferenceBackwardMatchesFiniteDifferences) {
  const uint64_t seed = test_seed();
  for (bool silu : {false, true})
    for (int64_t seq : {int64_t{2}, int64_t{6}}) {  // 2: fewer tokens than the state holds
      ConvTensors in(2, seq, 3, 4, DType::f64, seed);
      ShortConvOptions options;
      options.silu = silu;
      Tensor probe_y = random_tensor_for_test(in.x.shape(), DType::f64, seed, 5, -1, 1);
      Tensor probe_s = random_tensor_for_test(in.state.shape(), DType::f64, seed, 6, -1, 1);
      auto loss = [&] {
        Tensor y = Tensor::empty(in.x.shape(), DType::f64), s = Tensor::empty(in.state.shape(), DType::f64);
        short_conv_reference<double>({in.x, in.weight, in.bias, in.state, y, s, options});
        return sum_of_products(y, probe_y) + sum_of_products(s, probe_s);
      };
      Tensor dx = Tensor::empty(in.x.shape(), DType::f64), dw = Tensor::empty(in.weight.shape(), DType::f64);
      Tensor db = Tensor::empty(in.bias.shape(), DType::f64), ds = Tensor::empty(in.state.shape(), DType::f64);
      short_conv_backward_reference<double>(
          {in.x, in.weight, in.bias, in.state, probe_y, probe_s, dx, dw, db, ds, options});
      const std::string what = str_cat(" silu=", silu, " seq=", seq);
      expect_gradient_matches_finite_differences(in.x, dx, loss, "dx" + what, seed);
      expect_gradient_matches_finite_differences(in.weight, dw, loss, "dweight" + what, seed);
      expect_gradient_matches_finite_differences(in.bias, db, loss, "dbias" + what, seed);
      expect_gradient_matches_finite_differences(in.state, ds, loss, "d_initial_state" + what, seed);
    }
}

TEST(ShortConv, DecodeStepsAndSplitSequencesEqualTheWholeSequenceBitwise) {
  const uint64_t seed = test_seed();
  const int64_t batch = 2, seq = 23, channels = 37, kernel = 4;
  ConvTensors in(batch, seq, channels, kernel, DType::f32, seed);
  Tensor y = Tensor::empty(in.x.shape(), DType::f32), final_state = Tensor::empty(in.state.shape(), DType::f32);
  short_conv({in.x, in.weight, in.bias, in.state, y, final_state, {}});
  for (int64_t split : {int64_t{1}, int64_t{2}, int64_t{11}}) {
    Tensor cache = copy_tensor(in.state), y_parts = Tensor::empty(y.shape(), DType::f32);
    poison(y_parts);
    for (int64_t t0 = 0; t0 < seq; t0 += split) {
      const int64_t t1 = std::min(seq, t0 + split);
      Tensor part = Tensor::empty({batch, t1 - t0, channels}, DType::f32), x = token_range(in.x, t0, t1);
      short_conv({x, in.weight, in.bias, cache, part, cache, {}});
      write_token_range(y_parts, t0, part);
    }
    EXPECT_EQ(to_vector<float>(y_parts), to_vector<float>(y)) << "split=" << split << " seed=" << seed;
    EXPECT_EQ(to_vector<float>(cache), to_vector<float>(final_state)) << "split=" << split << " seed=" << seed;
  }
}

// Every block size (with or without streaming stores) gives y, dx and d_initial_state bitwise
// equal to one block covering the sequence (each is the same sum of the same recomputed dz whatever the block), and
// dweight and dbias equal up to the order of the block sums. Kernels 1-4 run the register windows, 6 the in-memory
// ones; 23 tokens leave a partial last block, 2 are fewer than the state holds.
TEST(ShortConv, TokenBlocksChangeOnlyTheOrderOfTheWeightSums) {
  const uint64_t seed = test_seed();
  for (int64_t kernel : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{6}})
    for (int64_t seq : {int64_t{2}, int64_t{23}}) {
      ConvTensors in(2, seq, 37, kernel, DType::f32, seed + kernel);
      Tensor dy = random_tensor_for_test(in.x.shape(), DType::f32, seed + kernel, 7, -1, 1);
      Tensor d_final = random_tensor_for_test(in.state.shape(), DType::f32, seed + kernel, 8, -1, 1);
      auto run = [&](const std::string& impl, int64_t block, int64_t streaming) {
        const ConfigParams config = config_to_params(ShortConvCpuConfig{block, streaming});
        Tensor y = Tensor::empty(in.x.shape(), DType::f32), dx = Tensor::empty(in.x.shape(), DType::f32);
        Tensor dw = Tensor::empty(in.weight.shape(), DType::f32), db = Tensor::empty(in.bias.shape(), DType::f32);
        Tensor ds = Tensor::empty(in.state.shape(), DType::f32);
        for (Tensor* t : {&y, &dx, &dw, &db, &ds}) poison(*t);
        short_conv({in.x, in.weight, in.bias, in.state, y, TensorView{}, {}}, Dispatch{impl, &config});
        short_conv_backward({in.x, in.weight, in.bias, in.state, dy, d_final, dx, dw, db, ds, {}},
                            Dispatch{impl, &config});
        return std::pair{concatenated({&y, &dx, &ds}), concatenated({&dw, &db})};
      };
      const ShortConvArgs probe{in.x, in.weight, in.bias, in.state, in.x, TensorView{}, {}};
      for (const auto* impl : short_conv_op().usable_impls(probe)) {
        const auto whole = run(impl->name, 1024, 0);
        for (int64_t block : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{7}, int64_t{1023}}) {
          const int64_t streaming = block % 2;  // non-temporal stores write the same values
          const auto blocked = run(impl->name, block, streaming);
          const std::string context = str_cat(impl->name, " kernel=", kernel, " seq=", seq, " block=", block,
                                              " streaming=", streaming, " seed=", seed);
          EXPECT_EQ(blocked.first, whole.first) << context;
          ASSERT_EQ(blocked.second.size(), whole.second.size());
          for (size_t i = 0; i < whole.second.size(); ++i)
            EXPECT_NEAR(blocked.second[i], whole.second[i], 1e-5 * (1 + std::abs(whole.second[i]))) << context;
        }
      }
    }
}

TEST(ShortConv, BackwardDoesNotDependOnTheThreadCount) {
  const uint64_t seed = test_seed();
  ConvTensors in(2, 300, 40, 4, DType::f32, seed);
  Tensor dy = random_tensor_for_test(in.x.shape(), DType::f32, seed, 7, -1, 1);
  auto run = [&] {
    Tensor dx = Tensor::empty(in.x.shape(), DType::f32), dw = Tensor::empty(in.weight.shape(), DType::f32);
    Tensor db = Tensor::empty(in.bias.shape(), DType::f32), ds = Tensor::empty(in.state.shape(), DType::f32);
    short_conv_backward({in.x, in.weight, in.bias, in.state, dy, TensorView{}, dx, dw, db, ds, {}});
    return concatenated({&dx, &dw, &db, &ds});
  };
  const std::vector<double> one = run_with_threads(1, run);
  EXPECT_EQ(run_with_threads(3, run), one) << "seed=" << seed;
}

TEST(ShortConv, RejectsBadArgumentsNamingOpAndArgument) {
  ConvTensors in(1, 8, 16, 4, DType::f32, 1);
  Tensor y = Tensor::empty(in.x.shape(), DType::f32);
  const ShortConvArgs good{in.x, in.weight, in.bias, in.state, y, TensorView{}, {}};
  EXPECT_NO_THROW(short_conv(good));
  Tensor wrong_weight = Tensor::zeros({15, 4}, DType::f32);
  ShortConvArgs args = good;
  args.weight = wrong_weight;
  expect_error([&] { short_conv(args); }, "short_conv: weight");
  Tensor long_state = Tensor::zeros({1, 4, 16}, DType::f32);  // K rows instead of K - 1
  args = good;
  args.initial_state = long_state;
  expect_error([&] { short_conv(args); }, "short_conv: initial_state");
  Tensor bias17 = Tensor::zeros({17}, DType::f32);
  args = good;
  args.bias = bias17;
  expect_error([&] { short_conv(args); }, "short_conv: bias");
}

}  // namespace
}  // namespace lathe
