#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/moe_router/moe_router_cuda.h"
#include "lathe/ops/moe_router/moe_router_cuda_body.h"

namespace lathe {
namespace {

constexpr int kThreads = 128;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void forward_tokens(moe_router_cuda::Forward a, int64_t tokens) {
  const int64_t t = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (t < tokens) moe_router_cuda::forward_token(a, t);
}

__global__ void backward_tokens(moe_router_cuda::Backward a, int64_t tokens) {
  const int64_t t = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (t < tokens) moe_router_cuda::backward_token(a, t);
}

void run_forward(const MoeRouterArgs& args, const MoeRouterCpuConfig&) {
  const int64_t tokens = args.logits.dim(0);
  if (tokens == 0) return;
  forward_tokens<<<blocks_for(tokens), kThreads, 0, cuda::lathe_stream()>>>(moe_router_cuda::forward_of(args), tokens);
  LATHE_CUDA_CHECK_LAUNCH("moe_router (cuda)");
}

void run_backward(const MoeRouterBackwardArgs& args, const MoeRouterBackwardCpuConfig&) {
  const int64_t tokens = args.probs.dim(0);
  if (tokens == 0) return;
  backward_tokens<<<blocks_for(tokens), kThreads, 0, cuda::lathe_stream()>>>(moe_router_cuda::backward_of(args),
                                                                             tokens);
  LATHE_CUDA_CHECK_LAUNCH("moe_router_backward (cuda)");
}

}  // namespace

Impl<MoeRouterArgs, MoeRouterCpuConfig> moe_router_cuda_impl() {
  auto impl = default_config_cuda_impl<MoeRouterArgs, MoeRouterCpuConfig>(run_forward);
  impl.supported = [](const MoeRouterArgs& args) {
    return moe_router_cuda::supported(args.logits.dim(1), args.options);
  };
  return impl;
}

Impl<MoeRouterBackwardArgs, MoeRouterBackwardCpuConfig> moe_router_backward_cuda_impl() {
  auto impl = default_config_cuda_impl<MoeRouterBackwardArgs, MoeRouterBackwardCpuConfig>(run_backward);
  impl.supported = [](const MoeRouterBackwardArgs& args) {
    return moe_router_cuda::supported(args.probs.dim(1), args.options);
  };
  return impl;
}

}  // namespace lathe
