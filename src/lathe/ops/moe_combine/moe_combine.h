// MoE combine (unpermute): the experts' outputs, in moe_permute's grouped order, scattered back to
// their tokens and summed with the router's weights. With slots s = t * top_k + k:
//   y[t, :] (+)= sum over k = 0..top_k-1, in that order, of weights[t, k] * expert_out[destination[s], :]
// Backward:
//   d_expert_out[destination[s], :] = weights[t, k] * dy[t, :]
//   d_weights[t, k]                 = dot(dy[t, :], expert_out[destination[s], :])
// Either backward output may be absent (data == nullptr): a router without gradient skips
// d_weights. destination is moe_permute's (a permutation of [0, tokens * top_k)); all float
// tensors are f32, destination is i32. With accumulate, y already holds e.g. a shared expert's
// output, and the routed sum is added to it (y's value first, then k ascending).
// Errors (lathe::Error): wrong rank, shape, dtype, non-contiguous tensors, a destination outside
// [0, tokens * top_k) named by position and value.
// Determinism: each output element has one writer and a fixed order of operations (a d_weights dot
// product sums vector lanes in a fixed order), so results are bitwise identical for every thread
// count and config at a given ISA level.
// On the GPU: moe_combine_cuda.h ("cuda_emulated" runs its kernels on the host).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct MoeCombineArgs {
  TensorView expert_out;    // (tokens * top_k, n) f32, in permuted order
  TensorView weights;       // (tokens, top_k) f32: the router's combine weights
  TensorView destination;   // (tokens * top_k) i32, from moe_permute
  TensorView y;             // (tokens, n) f32 output
  bool accumulate = false;  // y += (so a shared expert's output can be there first)
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(expert_out), visit(weights), visit(destination), visit(y);
  }
};

struct MoeCombineBackwardArgs {
  TensorView expert_out;    // (tokens * top_k, n) f32, as in the forward
  TensorView weights;       // (tokens, top_k) f32, as in the forward
  TensorView destination;   // (tokens * top_k) i32, as in the forward
  TensorView dy;            // (tokens, n) f32
  TensorView d_expert_out;  // (tokens * top_k, n) f32 output, optional (data may be null)
  TensorView d_weights;     // (tokens, top_k) f32 output, optional (data may be null)
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(expert_out), visit(weights), visit(destination), visit(dy), visit(d_expert_out), visit(d_weights);
  }
};

struct MoeCombineCpuConfig {
  int64_t tokens_per_task = 8;  // minimum tokens per parallel chunk
  int64_t streaming = 0;        // 1: non-temporal stores for y / d_expert_out (outputs larger than the caches)
  template <class Visit>
  void visit(Visit&& field) {
    field("tokens_per_task", tokens_per_task);
    field("streaming", streaming);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void moe_combine(const MoeCombineArgs& args, const Dispatch& dispatch = {});
void moe_combine_backward(const MoeCombineBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape or dtype, or the bad index.
void validate(const MoeCombineArgs& args);
void validate(const MoeCombineBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline).
template <class T>
void moe_combine_reference(const MoeCombineArgs& args);
template <class T>
void moe_combine_backward_reference(const MoeCombineBackwardArgs& args);

OpCost moe_combine_cost(const MoeCombineArgs& args);
OpCost moe_combine_backward_cost(const MoeCombineBackwardArgs& args);

const Op<MoeCombineArgs, MoeCombineCpuConfig>& moe_combine_op();
const Op<MoeCombineBackwardArgs, MoeCombineCpuConfig>& moe_combine_backward_op();

}  // namespace lathe
