// Dropless token permutation for mixture-of-experts: every (token, k) routing slot's copy of x's
// row, grouped by expert so each expert's rows are one contiguous block (the grouped GEMM's input).
// With slots s = t * top_k + k and e(s) = expert_ids[t, k]:
//   group_offsets[e]  = number of slots routed to experts < e        (group_offsets[n_experts] = slots)
//   destination[s]    = group_offsets[e(s)] + #{s' < s : e(s') = e(s)}   (a stable counting sort)
//   source[r]         = the slot s with destination[s] = r              (the inverse permutation)
//   permuted[r, :]    = x[source[r] / top_k, :]
// So expert e's rows are [group_offsets[e], group_offsets[e + 1]), in ascending slot order; the
// layout depends only on expert_ids, never on the thread count. No capacity, nothing dropped: an
// expert may receive zero rows or all of them.
// Backward (the adjoint of the row copies):
//   dx[t, :] (+)= sum over k = 0..top_k-1, in that order, of d_permuted[destination[t*top_k + k], :]
// x and permuted are f32 or bf16 (the same; bf16 rows are copied bit for bit); expert_ids,
// source and destination are i32; group_offsets is i64; d_permuted and dx are f32.
// Errors (lathe::Error): wrong rank, shape, dtype, non-contiguous tensors, and an expert id outside
// [0, n_experts), named by position and value ("moe_permute: expert_ids[3, 1] = 9 is out of range
// [0, 8)"); in the backward, a destination outside [0, tokens * top_k).
// Determinism: every output element is written by one thread from a fixed order of inputs, so
// results are bitwise identical for every thread count and config.
// On the GPU: moe_permute_cuda.h (the same sort, the same bits; "cuda_emulated" runs its kernels on the host).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct MoePermuteArgs {
  TensorView x;           // (tokens, d) f32 or bf16
  TensorView expert_ids;  // (tokens, top_k) i32, each in [0, n_experts)
  int64_t n_experts = 0;
  TensorView permuted;       // (tokens * top_k, d) x's dtype, output: x's rows grouped by expert
  TensorView group_offsets;  // (n_experts + 1) i64 output: expert e's rows are [offsets[e], offsets[e + 1])
  TensorView source;         // (tokens * top_k) i32 output: permuted row r is the copy for slot source[r]
  TensorView destination;    // (tokens * top_k) i32 output: destination[t * top_k + k] = its permuted row
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(expert_ids), visit(permuted), visit(group_offsets), visit(source), visit(destination);
  }
};

struct MoePermuteBackwardArgs {
  TensorView d_permuted;   // (tokens * top_k, d) f32
  TensorView destination;  // (tokens * top_k) i32, from the forward
  int64_t top_k = 1;
  TensorView dx;            // (tokens, d) f32 output
  bool accumulate = false;  // dx += instead of =
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(d_permuted), visit(destination), visit(dx);
  }
};

struct MoePermuteCpuConfig {
  int64_t rows_per_task = 8;  // minimum permuted rows per parallel chunk
  int64_t streaming = 0;      // 1: non-temporal stores for permuted (outputs larger than the caches)
  template <class Visit>
  void visit(Visit&& field) {
    field("rows_per_task", rows_per_task);
    field("streaming", streaming);
  }
};

struct MoePermuteBackwardCpuConfig {
  int64_t tokens_per_task = 8;  // minimum dx rows per parallel chunk
  int64_t streaming = 0;        // 1: non-temporal stores for dx (outputs larger than the caches)
  template <class Visit>
  void visit(Visit&& field) {
    field("tokens_per_task", tokens_per_task);
    field("streaming", streaming);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void moe_permute(const MoePermuteArgs& args, const Dispatch& dispatch = {});
void moe_permute_backward(const MoePermuteBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape or dtype, or the bad index.
void validate(const MoePermuteArgs& args);
void validate(const MoePermuteBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline), outputs of any dtype.
template <class T>
void moe_permute_reference(const MoePermuteArgs& args);
template <class T>
void moe_permute_backward_reference(const MoePermuteBackwardArgs& args);

OpCost moe_permute_cost(const MoePermuteArgs& args);
OpCost moe_permute_backward_cost(const MoePermuteBackwardArgs& args);

const Op<MoePermuteArgs, MoePermuteCpuConfig>& moe_permute_op();
const Op<MoePermuteBackwardArgs, MoePermuteBackwardCpuConfig>& moe_permute_backward_op();

}  // namespace lathe
