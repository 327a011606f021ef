#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/clamped_swiglu/clamped_swiglu_cuda.h"
#include "lathe/ops/clamped_swiglu/clamped_swiglu_cuda_body.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void forward(const float* gate_up, int64_t n, float alpha, float limit, float* out) {
  const int64_t j = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (j < n) clamped_swiglu_cuda::forward_element(gate_up, j, alpha, limit, out);
}

__global__ void backward(const float* gate_up, const float* dy, int64_t n, float alpha, float limit, float* d_gate_up) {
  const int64_t j = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (j < n) clamped_swiglu_cuda::backward_element(gate_up, dy, j, alpha, limit, d_gate_up);
}

void run_forward(const ClampedSwigluArgs& args, const ClampedSwigluConfig&) {
  const int64_t n = args.out.numel();
  if (n == 0) return;
  forward<<<blocks_for(n), kThreads, 0, cuda::lathe_stream()>>>(
      static_cast<const float*>(args.gate_up.data), n, static_cast<float>(args.alpha), static_cast<float>(args.limit),
      static_cast<float*>(args.out.data));
  LATHE_CUDA_CHECK_LAUNCH("clamped_swiglu (cuda)");
}

void run_backward(const ClampedSwigluBackwardArgs& args, const ClampedSwigluConfig&) {
  const int64_t n = args.dy.numel();
  if (n == 0) return;
  backward<<<blocks_for(n), kThreads, 0, cuda::lathe_stream()>>>(
      static_cast<const float*>(args.gate_up.data), static_cast<const float*>(args.dy.data), n,
      static_cast<float>(args.alpha), static_cast<float>(args.limit), static_cast<float*>(args.d_gate_up.data));
  LATHE_CUDA_CHECK_LAUNCH("clamped_swiglu_backward (cuda)");
}

}  // namespace

Impl<ClampedSwigluArgs, ClampedSwigluConfig> clamped_swiglu_cuda_impl() {
  return default_config_cuda_impl<ClampedSwigluArgs, ClampedSwigluConfig>(run_forward);
}

Impl<ClampedSwigluBackwardArgs, ClampedSwigluConfig> clamped_swiglu_backward_cuda_impl() {
  return default_config_cuda_impl<ClampedSwigluBackwardArgs, ClampedSwigluConfig>(run_backward);
}

}  // namespace lathe
