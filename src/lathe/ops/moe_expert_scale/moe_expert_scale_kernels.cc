// moe_expert_scale CPU kernels, compiled once per ISA (scalar, avx2, avx512) via
// lathe_add_isa_kernels: split over slots across threads; d_scale in one pass over the slots in
// order, one fused multiply-add each (per expert the same sequence as the GPU's thread for that
// expert, moe_expert_scale_cuda_body.h, which is not included here: its inline functions compiled
// with this file's ISA flags could stand in for the generic ones at link time).
#include <algorithm>
#include <cmath>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"  // LATHE_ISA_NS
#include "lathe/ops/moe_expert_scale/moe_expert_scale.h"

namespace lathe::LATHE_ISA_NS {
namespace {

// out[slot] = values[slot] * scale[ids[slot]]
void scale_slots(const TensorView& values, const MoeExpertScaleCpuConfig& config, const float* scale,
                 const int32_t* ids, float* out) {
  const float* in = static_cast<const float*>(values.data);
  parallel_for(values.numel(), std::max<int64_t>(config.slots_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t slot = begin; slot < end; ++slot) out[slot] = in[slot] * scale[ids[slot]];
  });
}

}  // namespace

void moe_expert_scale_kernel(const MoeExpertScaleArgs& args, const MoeExpertScaleCpuConfig& config) {
  scale_slots(args.weights, config, static_cast<const float*>(args.scale.data),
              static_cast<const int32_t*>(args.expert_ids.data), static_cast<float*>(args.out.data));
}

void moe_expert_scale_backward_kernel(const MoeExpertScaleBackwardArgs& args, const MoeExpertScaleCpuConfig& config) {
  const float* scale = static_cast<const float*>(args.scale.data);
  const int32_t* ids = static_cast<const int32_t*>(args.expert_ids.data);
  if (args.d_weights.data) scale_slots(args.dy, config, scale, ids, static_cast<float*>(args.d_weights.data));
  if (args.d_scale.data) {
    const float* dy = static_cast<const float*>(args.dy.data);
    const float* weights = static_cast<const float*>(args.weights.data);
    float* d_scale = static_cast<float*>(args.d_scale.data);
    std::fill(d_scale, d_scale + args.d_scale.numel(), 0.0f);
    for (int64_t slot = 0; slot < args.weights.numel(); ++slot)
      d_scale[ids[slot]] = std::fma(dy[slot], weights[slot], d_scale[ids[slot]]);
  }
}

}  // namespace lathe::LATHE_ISA_NS
