// The CUDA implementations of moe_router and moe_router_backward (moe_router_cuda.cu), registered
// by moe_router.cc in builds with the CUDA backend: one thread per token, the kernels of
// moe_router_cuda_body.h (which the "cuda_emulated" implementation runs on the host). Correctness
// first: a token's row is read from memory by its own thread (uncoalesced across a warp); the
// router is a few percent of an MoE layer's work. Up to 1024 experts, 64 groups, top-64.
#pragma once

#include "lathe/ops/moe_router/moe_router.h"

namespace lathe {

Impl<MoeRouterArgs, MoeRouterCpuConfig> moe_router_cuda_impl();
Impl<MoeRouterBackwardArgs, MoeRouterBackwardCpuConfig> moe_router_backward_cuda_impl();

}  // namespace lathe
