// Token embedding lookup and its gradient (every LLM's input layer; Gemma scales by sqrt(d_model)):
//   out[t, :]    = table[ids[t], :] * scale
//   dtable[v, :] = scale * sum over t with ids[t] == v of d_out[t, :]   (overwritten; rows of
//                  tokens that do not occur are zero)
// table and out are f32 or bf16 (the same); ids are i32 or i64; d_out is f32 or bf16; dtable f32.
// Errors (lathe::Error): wrong rank, shape, dtype, non-contiguous tensors, non-finite scale, and
// any id outside [0, vocab), named by position and value ("embedding: ids[5] = 130000 is out of
// range [0, 128256)").
// The backward runs without atomics: dtable is zeroed by vocab rows, then threads own disjoint
// column blocks and accumulate tokens in order, so every element is summed by one thread in token
// order and the result is bitwise identical for every thread count and config.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct EmbeddingArgs {
  TensorView table;  // (vocab, dim)
  TensorView ids;    // (tokens)
  TensorView out;    // (tokens, dim)  output
  float scale = 1.0f;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(table), visit(ids), visit(out);
  }
};

struct EmbeddingBackwardArgs {
  TensorView ids;     // (tokens)
  TensorView d_out;   // (tokens, dim)
  TensorView dtable;  // (vocab, dim)  output, overwritten
  float scale = 1.0f;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(ids), visit(d_out), visit(dtable);
  }
};

struct EmbeddingCpuConfig {
  int64_t tokens_per_task = 16;  // rows of out per parallel chunk
  template <class Visit>
  void visit(Visit&& field) {
    field("tokens_per_task", tokens_per_task);
  }
};

struct EmbeddingBackwardCpuConfig {
  int64_t columns_per_task = 256;  // dtable columns per parallel chunk (rounded up to 16)
  template <class Visit>
  void visit(Visit&& field) {
    field("columns_per_task", columns_per_task);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void embedding(const EmbeddingArgs& args, const Dispatch& dispatch = {});
void embedding_backward(const EmbeddingBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape or dtype, or the bad id.
void validate(const EmbeddingArgs& args);
void validate(const EmbeddingBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline), any dtypes.
template <class T>
void embedding_reference(const EmbeddingArgs& args);
template <class T>
void embedding_backward_reference(const EmbeddingBackwardArgs& args);

OpCost embedding_cost(const EmbeddingArgs& args);
OpCost embedding_backward_cost(const EmbeddingBackwardArgs& args);

const Op<EmbeddingArgs, EmbeddingCpuConfig>& embedding_op();
const Op<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig>& embedding_backward_op();

}  // namespace lathe
