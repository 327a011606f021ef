#include <cmath>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/adamw/adamw_cuda.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

struct Coefficients {
  float decay_keep, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_sqrt_bias_correction2, eps,
      grad_scale;
};

__global__ void adamw_update(float* param, const float* grad, float* m, float* v, __nv_bfloat16* param_bf16, int64_t n,
                             Coefficients c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grad[i] * c.grad_scale;
    const float m_new = fmaf(c.beta1, m[i], c.one_minus_beta1 * g);
    const float v_new = fmaf(c.beta2, v[i], c.one_minus_beta2 * g * g);
    const float denominator = fmaf(sqrtf(v_new), c.inv_sqrt_bias_correction2, c.eps);
    const float p = fmaf(-c.step_size, m_new / denominator, param[i] * c.decay_keep);
    m[i] = m_new;
    v[i] = v_new;
    param[i] = p;
    if (param_bf16 != nullptr) param_bf16[i] = __float2bfloat16_rn(p);
  }
}

void run(const AdamWArgs& args, const AdamWCpuConfig&) {
  const int64_t n = args.param.dim(0);
  if (n == 0) return;
  const double step = static_cast<double>(args.step);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(args.beta1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(args.beta2), step);
  const Coefficients coefficients{1.0f - args.lr * args.weight_decay,
                                  args.beta1,
                                  1.0f - args.beta1,
                                  args.beta2,
                                  1.0f - args.beta2,
                                  static_cast<float>(args.lr / bias_correction1),
                                  static_cast<float>(1.0 / std::sqrt(bias_correction2)),
                                  args.eps,
                                  args.grad_scale};
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 16);
  adamw_update<<<static_cast<unsigned>(blocks), kThreads, 0, cuda::lathe_stream()>>>(
      static_cast<float*>(args.param.data), static_cast<const float*>(args.grad.data), static_cast<float*>(args.m.data),
      static_cast<float*>(args.v.data), static_cast<__nv_bfloat16*>(args.param_bf16.data), n, coefficients);
  LATHE_CUDA_CHECK_LAUNCH("adamw (cuda)");
}

}  // namespace

Impl<AdamWArgs, AdamWCpuConfig> adamw_cuda_impl() { return default_config_cuda_impl<AdamWArgs, AdamWCpuConfig>(run); }

}  // namespace lathe
