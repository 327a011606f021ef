// The sum of squares of a vector, accumulated in double: the optimizer's global gradient norm
// (train/optimizer.h) is the square root of this summed over every gradient, on the device the
// gradients live on.
//   out[0] = (accumulate ? out[0] : 0) + sum_i x[i]^2
// x: (n) f32, contiguous; out: (1) f64 (read when accumulate, then written).
// Deterministic for any thread count: the sum runs over fixed chunks of kSumSquaresChunk elements,
// each summed in 8 f64 lanes (CPU) or a fixed f64 tree (CUDA), and the chunk sums are added to
// out in chunk order. The CPU and CUDA results differ in the last bits (their in-chunk orders
// differ), never from run to run.
// Errors: x not f32, not 1-D or not contiguous; out not a (1) f64 tensor.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

inline constexpr int64_t kSumSquaresChunk = 1 << 16;

struct SumSquaresArgs {
  TensorView x;    // (n) f32
  TensorView out;  // (1) f64
  bool accumulate = false;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(out);
  }
};

// No tunable parameter: the chunk size fixes the result's bits.
struct SumSquaresConfig {
  template <class Visit>
  void visit(Visit&&) {}
};

void sum_squares(const SumSquaresArgs& args, const Dispatch& dispatch = {});
void validate(const SumSquaresArgs& args);
// Plain loop in T (double: the oracle; float: the naive baseline).
template <class T>
void sum_squares_reference(const SumSquaresArgs& args);
OpCost sum_squares_cost(const SumSquaresArgs& args);
const Op<SumSquaresArgs, SumSquaresConfig>& sum_squares_op();

}  // namespace lathe
