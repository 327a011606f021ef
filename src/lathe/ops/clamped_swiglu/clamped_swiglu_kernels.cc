// clamped_swiglu CPU kernels, compiled once per ISA (scalar, avx2, avx512) via
// lathe_add_isa_kernels: rows split across threads, each element by clamped_swiglu_math.h (the
// steps every implementation takes; internal linkage there, so this file's ISA flags stay here).
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"  // LATHE_ISA_NS
#include "lathe/ops/clamped_swiglu/clamped_swiglu.h"
#include "lathe/ops/clamped_swiglu/clamped_swiglu_math.h"

namespace lathe::LATHE_ISA_NS {
namespace {

constexpr int64_t kElementsPerTask = 16384;

}  // namespace

void clamped_swiglu_kernel(const ClampedSwigluArgs& args, const ClampedSwigluConfig&) {
  const float* x = static_cast<const float*>(args.gate_up.data);
  float* out = static_cast<float*>(args.out.data);
  const auto alpha = static_cast<float>(args.alpha), limit = static_cast<float>(args.limit);
  parallel_for(args.out.numel(), kElementsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j)
      out[j] = clamped_swiglu_math::forward<float>(x[2 * j], x[2 * j + 1], alpha, limit);
  });
}

void clamped_swiglu_backward_kernel(const ClampedSwigluBackwardArgs& args, const ClampedSwigluConfig&) {
  const float* x = static_cast<const float*>(args.gate_up.data);
  const float* dy = static_cast<const float*>(args.dy.data);
  float* dx = static_cast<float*>(args.d_gate_up.data);
  const auto alpha = static_cast<float>(args.alpha), limit = static_cast<float>(args.limit);
  parallel_for(args.dy.numel(), kElementsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j)
      clamped_swiglu_math::backward<float>(x[2 * j], x[2 * j + 1], dy[j], alpha, limit, &dx[2 * j], &dx[2 * j + 1]);
  });
}

}  // namespace lathe::LATHE_ISA_NS
