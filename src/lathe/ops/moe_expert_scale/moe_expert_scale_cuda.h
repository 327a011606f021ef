// The CUDA implementations of moe_expert_scale and its backward (moe_expert_scale_cuda.cu),
// registered by moe_expert_scale.cc in builds with the CUDA backend: the kernels of
// moe_expert_scale_cuda_body.h (which the "cuda_emulated" implementation runs on the host), one
// thread per slot for out and d_weights, one per expert for d_scale (a serial pass over the slots
// in order: correctness first, deterministic).
#pragma once

#include "lathe/ops/moe_expert_scale/moe_expert_scale.h"

namespace lathe {

Impl<MoeExpertScaleArgs, MoeExpertScaleCpuConfig> moe_expert_scale_cuda_impl();
Impl<MoeExpertScaleBackwardArgs, MoeExpertScaleCpuConfig> moe_expert_scale_backward_cuda_impl();

}  // namespace lathe
