// The CUDA implementations of grouped_matmul and grouped_matmul_backward, registered by
// grouped_matmul.cc in builds with the CUDA backend (docs/cuda.md): a loop over the experts, each
// expert's rows one product through matmul's CUDA implementation (cuBLASLt: f32 in true f32, bf16
// with f32 accumulation), so the numbers are matmul's. group_offsets are read on the host
// (grouped_matmul_offsets) by the validation and again by the run: two small synchronous copies a
// call (cuBLASLt's grouped API, which would take them on the device, is the next step where MoE
// layers run on the GPU). An expert without rows costs nothing in the forward; its dw is zeroed
// (or left, accumulating).
//
// Backward, per expert e with rows x_e, dy_e (y_e = x_e @ w_e^T):
//   dy in x's dtype:            dx_e = dy_e @ w_e and dw_e (+)= dy_e^T @ x_e, two matmuls;
//   f32 dy with bf16 x and w:   one matmul_backward (its f32 gradient in three bf16 parts), dw_e
//                               through a scratch and `add` where it accumulates.
// Both are composite implementations (op.h): made of ops, copies and fills only, so the host
// simulation runs them as they are and the contract tests check their logic on every machine
// (op_contract_test.cc); their speed is cuBLASLt's plus one launch per expert and product.
#pragma once

#include "lathe/ops/grouped_matmul/grouped_matmul.h"

namespace lathe {

Impl<GroupedMatmulArgs, MatmulCpuConfig> grouped_matmul_cuda_impl();
Impl<GroupedMatmulBackwardArgs, MatmulCpuConfig> grouped_matmul_backward_cuda_impl();

}  // namespace lathe
