// LayerNorm over the last axis (GPT-2, BERT, Whisper):
//   mean[r]    = mean_d x[r, d]
//   inv_std[r] = 1 / sqrt(mean_d (x[r, d] - mean[r])^2 + eps)
//   y[r, d]    = (x[r, d] - mean[r]) * inv_std[r] * weight[d] + bias[d]     (bias optional)
// Backward, with xhat = (x - mean) * inv_std and g = dy * weight:
//   dx[r, d]   = inv_std[r] * (g[r, d] - mean_d g[r, :] - xhat[r, d] * mean_d (g * xhat)[r, :])
//   dweight[d] = sum_r dy[r, d] * xhat[r, d]     dbias[d] = sum_r dy[r, d]   (overwritten)
// x, y, dy, dx are f32 or bf16 (all the same); weight, bias, mean, inv_std, dweight, dbias are f32.
// A tensor whose data is null is absent: bias (no bias), mean/inv_std in the forward (not saved),
// dbias in the backward (not computed).
// Errors (lathe::Error): wrong rank, shape, dtype, non-contiguous tensors, eps <= 0.
// Results are bitwise reproducible for a fixed thread count (dweight/dbias are reduced from
// per-chunk partials in chunk order; the chunking follows the thread count).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct LayerNormArgs {
  TensorView x;        // (rows, dim)
  TensorView weight;   // (dim)
  TensorView bias;     // (dim)   data may be null: no bias
  TensorView y;        // (rows, dim)  output
  TensorView mean;     // (rows)  output, saved for backward; data may be null
  TensorView inv_std;  // (rows)  output, saved for backward; data may be null
  float eps = 1e-5f;
};

struct LayerNormBackwardArgs {
  TensorView x;        // (rows, dim)
  TensorView weight;   // (dim)
  TensorView mean;     // (rows) from the forward
  TensorView inv_std;  // (rows) from the forward
  TensorView dy;       // (rows, dim)
  TensorView dx;       // (rows, dim)  output
  TensorView dweight;  // (dim)        output
  TensorView dbias;    // (dim)        output; data may be null (no bias)
};

struct LayerNormCpuConfig {
  int64_t rows_per_task = 16;    // rows per parallel chunk (smaller: better balance, more overhead)
  int64_t streaming_stores = 0;  // 1: non-temporal stores for the large outputs (beyond the caches)
  template <class Visit>
  void visit(Visit&& field) {
    field("rows_per_task", rows_per_task);
    field("streaming_stores", streaming_stores);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void layer_norm(const LayerNormArgs& args, const Dispatch& dispatch = {});
void layer_norm_backward(const LayerNormBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape or dtype.
void validate(const LayerNormArgs& args);
void validate(const LayerNormBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline), any dtypes.
template <class T>
void layer_norm_reference(const LayerNormArgs& args);
template <class T>
void layer_norm_backward_reference(const LayerNormBackwardArgs& args);

OpCost layer_norm_cost(const LayerNormArgs& args);
OpCost layer_norm_backward_cost(const LayerNormBackwardArgs& args);

const Op<LayerNormArgs, LayerNormCpuConfig>& layer_norm_op();
const Op<LayerNormBackwardArgs, LayerNormCpuConfig>& layer_norm_backward_op();

}  // namespace lathe
