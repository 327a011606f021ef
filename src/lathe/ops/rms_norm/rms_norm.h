// RMSNorm over the last axis (Llama, Qwen, Mistral; Gemma with weight_offset = 1):
//   inv_rms[r] = 1 / sqrt(mean_d(x[r, d]^2) + eps)
//   y[r, d]    = x[r, d] * inv_rms[r] * (weight[d] + weight_offset)
// Backward, with w' = weight + weight_offset and c[r] = mean_d(dy * w' * x)[r]:
//   dx[r, d]   = inv_rms[r] * (dy[r, d] * w'[d] - x[r, d] * inv_rms[r]^2 * c[r])
//   dweight[d] = sum_r dy[r, d] * x[r, d] * inv_rms[r]       (overwritten, not accumulated)
// x, y, dy, dx are f32 or bf16 (all the same), except that y may be bf16 beside an f32 x (the f32
// result rounded once to nearest even: the bits of rounding an f32 y afterwards; bf16 training
// writes the normed input of bf16 products so); weight, inv_rms, dweight are f32.
// Results are bitwise reproducible for a fixed thread count (dweight's row split follows it).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct RmsNormArgs {
  TensorView x;        // (rows, dim)
  TensorView weight;   // (dim)
  TensorView y;        // (rows, dim)  output
  TensorView inv_rms;  // (rows)       output, saved for backward; data may be null
  float eps = 1e-6f;
  float weight_offset = 0.0f;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(weight), visit(y), visit(inv_rms);
  }
};

struct RmsNormBackwardArgs {
  TensorView x;        // (rows, dim)
  TensorView weight;   // (dim)
  TensorView inv_rms;  // (rows) from the forward
  TensorView dy;       // (rows, dim)
  TensorView dx;       // (rows, dim)  output
  TensorView dweight;  // (dim)        output
  float weight_offset = 0.0f;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(weight), visit(inv_rms), visit(dy), visit(dx), visit(dweight);
  }
};

struct RmsNormCpuConfig {
  int64_t rows_per_task = 16;  // rows per parallel chunk (smaller: better balance, more overhead)
  template <class Visit>
  void visit(Visit&& field) {
    field("rows_per_task", rows_per_task);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void rms_norm(const RmsNormArgs& args, const Dispatch& dispatch = {});
void rms_norm_backward(const RmsNormBackwardArgs& args, const Dispatch& dispatch = {});

// Throws lathe::Error naming the argument, expected and actual shape or dtype.
void validate(const RmsNormArgs& args);
void validate(const RmsNormBackwardArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline), any dtypes.
template <class T>
void rms_norm_reference(const RmsNormArgs& args);
template <class T>
void rms_norm_backward_reference(const RmsNormBackwardArgs& args);

OpCost rms_norm_cost(const RmsNormArgs& args);
OpCost rms_norm_backward_cost(const RmsNormBackwardArgs& args);

const Op<RmsNormArgs, RmsNormCpuConfig>& rms_norm_op();
const Op<RmsNormBackwardArgs, RmsNormCpuConfig>& rms_norm_backward_op();

}  // namespace lathe
