// AdamW CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// One streaming pass over param, grad, m, v (and the bf16 copy), split statically across threads.
// Bias corrections are computed once per call in double.
#include <algorithm>
#include <cmath>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/adamw/adamw.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::VecF;
using simd::load_row;
using simd::store_row;
constexpr int W = VecF::width;

template <bool kWriteBf16>
void update(const AdamWArgs& args, const AdamWCpuConfig& config) {
  const int64_t n = args.param.dim(0);
  if (n == 0) return;
  float* param = static_cast<float*>(args.param.data);
  const float* grad = static_cast<const float*>(args.grad.data);
  float* m = static_cast<float*>(args.m.data);
  float* v = static_cast<float*>(args.v.data);
  uint16_t* param_bf16 = static_cast<uint16_t*>(args.param_bf16.data);
  const double step = static_cast<double>(args.step);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(args.beta1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(args.beta2), step);
  const VecF decay_keep = VecF::broadcast(1.0f - args.lr * args.weight_decay);
  const VecF beta1 = VecF::broadcast(args.beta1), one_minus_beta1 = VecF::broadcast(1.0f - args.beta1);
  const VecF beta2 = VecF::broadcast(args.beta2), one_minus_beta2 = VecF::broadcast(1.0f - args.beta2);
  const VecF step_size = VecF::broadcast(static_cast<float>(args.lr / bias_correction1));
  const VecF inv_sqrt_bias_correction2 = VecF::broadcast(static_cast<float>(1.0 / std::sqrt(bias_correction2)));
  const VecF eps = VecF::broadcast(args.eps), grad_scale = VecF::broadcast(args.grad_scale);
  parallel_for(n, std::max<int64_t>(config.elements_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i += W) {
      const int64_t count = end - i;
      const VecF g = load_row(grad + i, count) * grad_scale;
      const VecF m_new = simd::fma(beta1, load_row(m + i, count), one_minus_beta1 * g);
      const VecF v_new = simd::fma(beta2, load_row(v + i, count), one_minus_beta2 * g * g);
      const VecF denominator = simd::fma(simd::sqrt(v_new), inv_sqrt_bias_correction2, eps);
      const VecF p = simd::fnma(step_size, m_new / denominator, load_row(param + i, count) * decay_keep);
      store_row(m + i, m_new, count);
      store_row(v + i, v_new, count);
      store_row(param + i, p, count);
      if constexpr (kWriteBf16) store_row(param_bf16 + i, p, count);
    }
  });
}

}  // namespace

void adamw_kernel(const AdamWArgs& args, const AdamWCpuConfig& config) {
  if (args.param_bf16.data)
    update<true>(args, config);
  else
    update<false>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
