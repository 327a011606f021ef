// One AdamW optimizer step, in place (Loshchilov & Hutter; the update of torch.optim.AdamW):
//   g      = grad * grad_scale
//   param -= lr * weight_decay * param                  (decoupled weight decay)
//   m      = beta1 * m + (1 - beta1) * g
//   v      = beta2 * v + (1 - beta2) * g^2
//   param -= (lr / (1 - beta1^step)) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// step is 1-based. param, grad, m, v are (n) f32; param_bf16 (n) bf16, when present, receives the
// updated param rounded to nearest-even (the copy the next forward reads).
// Elementwise, so results do not depend on the thread count.
// Errors: shape/dtype mismatch, non-contiguous tensors, step < 1, betas outside [0, 1), lr < 0,
// weight_decay < 0, eps <= 0.
#pragma once

#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct AdamWArgs {
  TensorView param;       // (n) f32 master weights, updated in place
  TensorView grad;        // (n) f32
  TensorView m;           // (n) f32 first moment, updated in place
  TensorView v;           // (n) f32 second moment, updated in place
  TensorView param_bf16;  // (n) bf16 output; data may be null (no copy)
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;         // 1-based step count, for bias correction
  float grad_scale = 1.0f;  // e.g. 1/accumulation steps times the clipping coefficient
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(param), visit(grad), visit(m), visit(v), visit(param_bf16);
  }
};

struct AdamWCpuConfig {
  int64_t elements_per_task = 65536;  // contiguous elements per parallel chunk
  template <class Visit>
  void visit(Visit&& field) {
    field("elements_per_task", elements_per_task);
  }
};

void adamw(const AdamWArgs& args, const Dispatch& dispatch = {});
void validate(const AdamWArgs& args);

// An optimizer step over many tensors (a model's parameters), bit for bit as adamw() on each in
// order. Every step is validated first (a bad one throws before any tensor changes). On a GPU the
// updates go out in one launch per 32 tensors (adamw_cuda.h), not one launch per tensor; on the
// host, and under the host simulation of a GPU, it is adamw() on each. The steps' tensors are all
// on one device.
void adamw_many(const std::vector<AdamWArgs>& steps);

// Plain loops in T from the current param/m/v; writes into the tensors args names (a reference
// run points param/m/v/param_bf16 at separate output tensors and reads the inputs from `inputs`).
template <class T>
void adamw_reference(const AdamWArgs& inputs, const AdamWArgs& outputs);

OpCost adamw_cost(const AdamWArgs& args);
const Op<AdamWArgs, AdamWCpuConfig>& adamw_op();

}  // namespace lathe
