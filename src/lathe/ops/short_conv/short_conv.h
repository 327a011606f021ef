// Causal depthwise short convolution (the `conv1d` of Qwen3-Next's gated delta net and of
// Mamba-2, kernel size K = conv_kernel, 4 in both), channel-last, with an optional fused SiLU:
//   z[b, t, c] = bias[c] + sum_{j < K} weight[c, j] * x~[b, t - (K - 1) + j, c]
//   y = silu(z) when options.silu, else z
// where x~[s] = x[s] for s >= 0 and initial_state[K - 1 + s] for -(K - 1) <= s < 0 (zeros when
// absent): the state holds the last K - 1 inputs, oldest first (transformers' F.conv1d with
// padding K - 1 and its conv_state, channel-last). final_state receives the last K - 1 inputs of
// x~ and may alias initial_state: a decode step (T = 1) updates the cache in place.
// Backward gives dx, dweight, dbias (when bias is given) and d_initial_state (when initial_state
// is given), from dy and d_final_state (optional). Token blocks are fixed by the config, and the
// weight and bias partials are summed in block order: bitwise reproducible for any thread count.
// f32, contiguous. Errors: lathe::Error naming the op and argument.
// Implementations: the CPU kernels (short_conv_kernels.cc) and, in builds with the CUDA backend, a
// CUDA kernel (short_conv_cuda.cu over short_conv_cuda_body.h, which "cuda_emulated" runs on the host).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct ShortConvOptions {
  bool silu = true;  // fuse y = silu(z) (both families use it)
};

struct ShortConvArgs {
  TensorView x;              // (B, T, C)
  TensorView weight;         // (C, K)
  TensorView bias;           // (C)           optional
  TensorView initial_state;  // (B, K - 1, C) optional (zeros when absent)
  TensorView y;              // (B, T, C)     output
  TensorView final_state;    // (B, K - 1, C) optional output; may alias initial_state
  ShortConvOptions options;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(weight), visit(bias), visit(initial_state), visit(y), visit(final_state);
  }
};

struct ShortConvBackwardArgs {
  TensorView x, weight, bias, initial_state;  // the forward's inputs (bias, initial_state optional)
  TensorView dy;                              // (B, T, C)
  TensorView d_final_state;                   // (B, K - 1, C) optional (absent: zero)
  TensorView dx;                              // (B, T, C)     output
  TensorView dweight;                         // (C, K)        output
  TensorView dbias;                           // (C)           output, required exactly when bias is given
  TensorView d_initial_state;                 // (B, K - 1, C) output, required exactly when initial_state is
  ShortConvOptions options;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(weight), visit(bias), visit(initial_state), visit(dy), visit(d_final_state), visit(dx),
        visit(dweight), visit(dbias), visit(d_initial_state);
  }
};

struct ShortConvCpuConfig {
  int64_t block_tokens = 256;    // tokens per task (the backward's partial sums follow these blocks)
  int64_t streaming_stores = 0;  // 1: non-temporal stores of y / dx (outputs beyond the caches)
  template <class Visit>
  void visit(Visit&& field) {
    field("block_tokens", block_tokens);
    field("streaming_stores", streaming_stores);
  }
};

void short_conv(const ShortConvArgs& args, const Dispatch& dispatch = {});
void short_conv_backward(const ShortConvBackwardArgs& args, const Dispatch& dispatch = {});

void validate(const ShortConvArgs& args);
void validate(const ShortConvBackwardArgs& args);

// Plain loops in T (double: the oracle; float: the naive baseline).
template <class T>
void short_conv_reference(const ShortConvArgs& args);
template <class T>
void short_conv_backward_reference(const ShortConvBackwardArgs& args);

OpCost short_conv_cost(const ShortConvArgs& args);
OpCost short_conv_backward_cost(const ShortConvBackwardArgs& args);

const Op<ShortConvArgs, ShortConvCpuConfig>& short_conv_op();
const Op<ShortConvBackwardArgs, ShortConvCpuConfig>& short_conv_backward_op();

}  // namespace lathe
