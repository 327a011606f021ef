#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/moe_combine/moe_combine_cuda.h"
#include "lathe/ops/moe_combine/moe_combine_cuda_body.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void combine(moe_combine_cuda::Tensors a, bool accumulate, int64_t n, float* y) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < n) moe_combine_cuda::combine_element(a, accumulate, i, y);
}

__global__ void expert_gradients(moe_combine_cuda::Tensors a, const float* dy, int64_t n, float* d_expert_out) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < n) moe_combine_cuda::expert_gradient_element(a, dy, i, d_expert_out);
}

__global__ void weight_gradients(moe_combine_cuda::Tensors a, const float* dy, int64_t slots, float* d_weights) {
  const int64_t slot = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (slot < slots) moe_combine_cuda::weight_gradient(a, dy, slot, d_weights);
}

void run_forward(const MoeCombineArgs& args, const MoeCombineCpuConfig&) {
  const int64_t n = args.y.numel();
  if (n == 0) return;
  combine<<<blocks_for(n), kThreads, 0, cuda::lathe_stream()>>>(
      moe_combine_cuda::tensors_of(args.expert_out, args.weights, args.destination), args.accumulate, n,
      static_cast<float*>(args.y.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_combine (cuda)");
}

void run_backward(const MoeCombineBackwardArgs& args, const MoeCombineCpuConfig&) {
  const auto a = moe_combine_cuda::tensors_of(args.expert_out, args.weights, args.destination);
  const auto* dy = static_cast<const float*>(args.dy.data);
  const cudaStream_t stream = cuda::lathe_stream();
  const int64_t slots = args.weights.numel(), n = slots * args.expert_out.dim(1);
  if (args.d_expert_out.data && n > 0) {
    expert_gradients<<<blocks_for(n), kThreads, 0, stream>>>(a, dy, n, static_cast<float*>(args.d_expert_out.data));
    LATHE_CUDA_CHECK_LAUNCH("moe_combine_backward (cuda): d_expert_out");
  }
  if (args.d_weights.data && slots > 0) {
    weight_gradients<<<blocks_for(slots), kThreads, 0, stream>>>(a, dy, slots,
                                                                 static_cast<float*>(args.d_weights.data));
    LATHE_CUDA_CHECK_LAUNCH("moe_combine_backward (cuda): d_weights");
  }
}

}  // namespace

Impl<MoeCombineArgs, MoeCombineCpuConfig> moe_combine_cuda_impl() {
  return default_config_cuda_impl<MoeCombineArgs, MoeCombineCpuConfig>(run_forward);
}

Impl<MoeCombineBackwardArgs, MoeCombineCpuConfig> moe_combine_backward_cuda_impl() {
  return default_config_cuda_impl<MoeCombineBackwardArgs, MoeCombineCpuConfig>(run_backward);
}

}  // namespace lathe
