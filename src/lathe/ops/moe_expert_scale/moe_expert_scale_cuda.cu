#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/moe_expert_scale/moe_expert_scale_cuda.h"
#include "lathe/ops/moe_expert_scale/moe_expert_scale_cuda_body.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void scale_slots(const float* values, moe_expert_scale_cuda::Tensors a, float* out) {
  const int64_t slot = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (slot < a.slots) moe_expert_scale_cuda::scale_slot(values, a, slot, out);
}

__global__ void scale_gradients(moe_expert_scale_cuda::Tensors a, const float* dy, int64_t experts, float* d_scale) {
  const int64_t expert = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (expert < experts) moe_expert_scale_cuda::scale_gradient(a, dy, expert, d_scale);
}

void run_forward(const MoeExpertScaleArgs& args, const MoeExpertScaleCpuConfig&) {
  const auto a = moe_expert_scale_cuda::tensors_of(args.weights, args.scale, args.expert_ids);
  if (a.slots == 0) return;
  scale_slots<<<blocks_for(a.slots), kThreads, 0, cuda::lathe_stream()>>>(a.weights, a,
                                                                          static_cast<float*>(args.out.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_expert_scale (cuda)");
}

void run_backward(const MoeExpertScaleBackwardArgs& args, const MoeExpertScaleCpuConfig&) {
  const auto a = moe_expert_scale_cuda::tensors_of(args.weights, args.scale, args.expert_ids);
  const auto* dy = static_cast<const float*>(args.dy.data);
  const cudaStream_t stream = cuda::lathe_stream();
  if (args.d_weights.data && a.slots > 0) {
    scale_slots<<<blocks_for(a.slots), kThreads, 0, stream>>>(dy, a, static_cast<float*>(args.d_weights.data));
    LATHE_CUDA_CHECK_LAUNCH("moe_expert_scale_backward (cuda): d_weights");
  }
  const int64_t experts = args.scale.numel();
  if (args.d_scale.data && experts > 0) {
    scale_gradients<<<blocks_for(experts), kThreads, 0, stream>>>(a, dy, experts,
                                                                  static_cast<float*>(args.d_scale.data));
    LATHE_CUDA_CHECK_LAUNCH("moe_expert_scale_backward (cuda): d_scale");
  }
}

}  // namespace

Impl<MoeExpertScaleArgs, MoeExpertScaleCpuConfig> moe_expert_scale_cuda_impl() {
  return default_config_cuda_impl<MoeExpertScaleArgs, MoeExpertScaleCpuConfig>(run_forward);
}

Impl<MoeExpertScaleBackwardArgs, MoeExpertScaleCpuConfig> moe_expert_scale_backward_cuda_impl() {
  return default_config_cuda_impl<MoeExpertScaleBackwardArgs, MoeExpertScaleCpuConfig>(run_backward);
}

}  // namespace lathe
