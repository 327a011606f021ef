// The CUDA implementations of moe_combine and moe_combine_backward (moe_combine_cuda.cu),
// registered by moe_combine.cc in builds with the CUDA backend: the kernels of
// moe_combine_cuda_body.h (which the "cuda_emulated" implementation runs on the host), one thread
// per element of y and of d_expert_out, one per (token, k) for d_weights (a serial dot product:
// correctness first). Each output element has one writer: deterministic.
#pragma once

#include "lathe/ops/moe_combine/moe_combine.h"

namespace lathe {

Impl<MoeCombineArgs, MoeCombineCpuConfig> moe_combine_cuda_impl();
Impl<MoeCombineBackwardArgs, MoeCombineCpuConfig> moe_combine_backward_cuda_impl();

}  // namespace lathe
