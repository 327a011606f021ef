// The CUDA kernel of adamw as LATHE_HOST_DEVICE functions: one GPU thread per element, launched by
// adamw_cuda.cu (one tensor a launch, or a batch of tensors: adamw_many) and run on the host by
// the "cuda_emulated" implementation (ops/cuda_emulated_impl.h). The arithmetic is the CPU
// kernel's (adamw_kernels.cc): bias corrections once per call in double, the update in f32 with
// the same fused multiply-adds, the bf16 copy rounded to nearest even (a NaN stays a quiet NaN),
// so every implementation writes the same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lathe/core/half.h"
#include "lathe/core/host_device.h"
#include "lathe/ops/adamw/adamw.h"

namespace lathe::adamw_cuda {

// What one call's update needs besides the tensors (from AdamWArgs, on the host).
struct Coefficients {
  float decay_keep, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_sqrt_bias_correction2, eps,
      grad_scale;
};

struct Tensors {
  float* param;
  const float* grad;
  float* m;
  float* v;
  uint16_t* param_bf16;  // null: no bf16 copy
  int64_t n;
};

inline Coefficients coefficients_of(const AdamWArgs& args) {
  const double step = static_cast<double>(args.step);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(args.beta1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(args.beta2), step);
  return {1.0f - args.lr * args.weight_decay,
          args.beta1,
          1.0f - args.beta1,
          args.beta2,
          1.0f - args.beta2,
          static_cast<float>(args.lr / bias_correction1),
          static_cast<float>(1.0 / std::sqrt(bias_correction2)),
          args.eps,
          args.grad_scale};
}

inline Tensors tensors_of(const AdamWArgs& args) {
  return {static_cast<float*>(args.param.data),
          static_cast<const float*>(args.grad.data),
          static_cast<float*>(args.m.data),
          static_cast<float*>(args.v.data),
          static_cast<uint16_t*>(args.param_bf16.data),
          args.param.numel()};
}

// Element i: g = grad * scale; m, v updated; param decayed then stepped (adamw.h's formula).
LATHE_HOST_DEVICE inline void update_element(const Tensors& t, const Coefficients& c, int64_t i) {
  const float g = t.grad[i] * c.grad_scale;
  const float m_new = fmaf(c.beta1, t.m[i], c.one_minus_beta1 * g);
  const float v_new = fmaf(c.beta2, t.v[i], c.one_minus_beta2 * g * g);
  const float denominator = fmaf(sqrtf(v_new), c.inv_sqrt_bias_correction2, c.eps);
  const float p = fmaf(-c.step_size, m_new / denominator, t.param[i] * c.decay_keep);
  t.m[i] = m_new;
  t.v[i] = v_new;
  t.param[i] = p;
  if (t.param_bf16 != nullptr) t.param_bf16[i] = float_to_bf16(p).bits;  // as simd.h's to_bf16_bits
}

// adamw_many's launches: up to kBatch tensors each, passed by value as the kernel's argument (well
// under CUDA's 4 KiB parameter limit), block row y updating tensor y.
constexpr int kBatch = 32;
struct Batch {
  Tensors tensors[kBatch];
  Coefficients coefficients[kBatch];
  int count = 0;
  int64_t largest = 0;  // elements of the largest tensor: the grid's x extent
};

// The steps in order, kBatch at a time (tensors without elements left out).
inline std::vector<Batch> batches_of(const std::vector<AdamWArgs>& steps) {
  std::vector<Batch> batches;
  for (const AdamWArgs& args : steps) {
    if (args.param.numel() == 0) continue;
    if (batches.empty() || batches.back().count == kBatch) batches.emplace_back();
    Batch& batch = batches.back();
    batch.tensors[batch.count] = tensors_of(args);
    batch.coefficients[batch.count] = coefficients_of(args);
    batch.largest = std::max(batch.largest, args.param.numel());
    ++batch.count;
  }
  return batches;
}

}  // namespace lathe::adamw_cuda
