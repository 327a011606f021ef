#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/moe_losses/moe_losses_cuda.h"
#include "lathe/ops/moe_losses/moe_losses_cuda_body.h"

namespace lathe {
namespace {

namespace body = moe_losses_cuda;
constexpr int kThreads = body::kLossThreads;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void balancing_loss(const float* probs, const int32_t* ids, int64_t tokens, int64_t experts, int64_t top_k,
                               float* loss) {
  __shared__ double terms[body::kMaxExperts];
  for (int64_t e = threadIdx.x; e < experts; e += kThreads)
    terms[e] = tokens > 0 ? body::expert_term(probs, ids, tokens, experts, top_k, e) : 0.0;
  __syncthreads();
  if (threadIdx.x == 0) *loss = body::balancing_loss(terms, experts, tokens);
}

__global__ void balancing_gradient(const int32_t* ids, int64_t tokens, int64_t experts, int64_t top_k, float d_loss,
                                   bool accumulate, float* d_probs) {
  __shared__ int64_t counts[body::kMaxExperts];
  for (int64_t e = threadIdx.x; e < experts; e += kThreads) counts[e] = body::count_slots(ids, tokens * top_k, e);
  __syncthreads();
  for (int64_t i = threadIdx.x; i < tokens * experts; i += kThreads)
    body::balancing_gradient_element(counts, tokens, experts, d_loss, accumulate, i, d_probs);
}

__global__ void z_loss(const float* logits, int64_t tokens, int64_t experts, float* loss) {
  __shared__ double partials[kThreads];
  partials[threadIdx.x] = body::z_partial(logits, tokens, experts, static_cast<int>(threadIdx.x));
  __syncthreads();
  if (threadIdx.x == 0) *loss = body::z_loss(partials, tokens);
}

__global__ void z_gradient(const float* logits, int64_t tokens, int64_t experts, float d_loss, bool accumulate,
                           float* d_logits) {
  const int64_t t = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (t < tokens) body::z_gradient_token(logits, tokens, experts, d_loss, accumulate, t, d_logits);
}

__global__ void bias_update(const int32_t* ids, int64_t tokens, int64_t top_k, int64_t experts, float rate, float* bias,
                            int64_t* counts) {
  const int64_t e = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (e < experts) body::bias_update_expert(ids, tokens, top_k, experts, rate, e, bias, counts);
}

const int32_t* ids_of(const TensorView& ids) { return static_cast<const int32_t*>(ids.data); }

void run_balancing_loss(const MoeLoadBalancingLossArgs& args, const MoeLossesCpuConfig&) {
  balancing_loss<<<1, kThreads, 0, cuda::lathe_stream()>>>(
      static_cast<const float*>(args.probs.data), ids_of(args.expert_ids), args.probs.dim(0), args.probs.dim(1),
      args.expert_ids.dim(1), static_cast<float*>(args.loss.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_load_balancing_loss (cuda)");
}

void run_balancing_gradient(const MoeLoadBalancingLossBackwardArgs& args, const MoeLossesCpuConfig&) {
  balancing_gradient<<<1, kThreads, 0, cuda::lathe_stream()>>>(ids_of(args.expert_ids), args.d_probs.dim(0),
                                                               args.d_probs.dim(1), args.expert_ids.dim(1), args.d_loss,
                                                               args.accumulate, static_cast<float*>(args.d_probs.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_load_balancing_loss_backward (cuda)");
}

void run_z_loss(const MoeZLossArgs& args, const MoeLossesCpuConfig&) {
  z_loss<<<1, kThreads, 0, cuda::lathe_stream()>>>(static_cast<const float*>(args.logits.data), args.logits.dim(0),
                                                   args.logits.dim(1), static_cast<float*>(args.loss.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_z_loss (cuda)");
}

void run_z_gradient(const MoeZLossBackwardArgs& args, const MoeLossesCpuConfig&) {
  const int64_t tokens = args.logits.dim(0);
  if (tokens == 0) return;
  z_gradient<<<blocks_for(tokens), kThreads, 0, cuda::lathe_stream()>>>(
      static_cast<const float*>(args.logits.data), tokens, args.logits.dim(1), args.d_loss, args.accumulate,
      static_cast<float*>(args.d_logits.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_z_loss_backward (cuda)");
}

void run_bias_update(const MoeBiasUpdateArgs& args, const MoeLossesCpuConfig&) {
  const int64_t experts = args.bias.dim(0);
  bias_update<<<blocks_for(experts), kThreads, 0, cuda::lathe_stream()>>>(
      ids_of(args.expert_ids), args.expert_ids.dim(0), args.expert_ids.dim(1), experts, args.rate,
      static_cast<float*>(args.bias.data), static_cast<int64_t*>(args.counts.data));
  LATHE_CUDA_CHECK_LAUNCH("moe_bias_update (cuda)");
}

template <class Args>
Impl<Args, MoeLossesCpuConfig> limited(void (*run)(const Args&, const MoeLossesCpuConfig&),
                                       int64_t (*experts)(const Args&)) {
  auto impl = default_config_cuda_impl<Args, MoeLossesCpuConfig>(run);
  impl.supported = [experts](const Args& args) { return experts(args) <= body::kMaxExperts; };
  return impl;
}

}  // namespace

Impl<MoeLoadBalancingLossArgs, MoeLossesCpuConfig> moe_load_balancing_loss_cuda_impl() {
  return limited<MoeLoadBalancingLossArgs>(run_balancing_loss,
                                           [](const MoeLoadBalancingLossArgs& args) { return args.probs.dim(1); });
}

Impl<MoeLoadBalancingLossBackwardArgs, MoeLossesCpuConfig> moe_load_balancing_loss_backward_cuda_impl() {
  return limited<MoeLoadBalancingLossBackwardArgs>(
      run_balancing_gradient, [](const MoeLoadBalancingLossBackwardArgs& args) { return args.d_probs.dim(1); });
}

Impl<MoeZLossArgs, MoeLossesCpuConfig> moe_z_loss_cuda_impl() {
  return default_config_cuda_impl<MoeZLossArgs, MoeLossesCpuConfig>(run_z_loss);
}

Impl<MoeZLossBackwardArgs, MoeLossesCpuConfig> moe_z_loss_backward_cuda_impl() {
  return default_config_cuda_impl<MoeZLossBackwardArgs, MoeLossesCpuConfig>(run_z_gradient);
}

Impl<MoeBiasUpdateArgs, MoeLossesCpuConfig> moe_bias_update_cuda_impl() {
  return default_config_cuda_impl<MoeBiasUpdateArgs, MoeLossesCpuConfig>(run_bias_update);
}

}  // namespace lathe
