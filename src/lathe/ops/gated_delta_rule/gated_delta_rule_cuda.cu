#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/gated_delta_rule/gated_delta_rule_cuda.h"
#include "lathe/ops/gated_delta_rule/gated_delta_rule_cuda_body.h"

namespace lathe {
namespace {

using gated_delta_rule_cuda::Normalised;
using gated_delta_rule_cuda::Params;
using gated_delta_rule_cuda::Workspace;

constexpr int kThreads = 128;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void normalise(Params p, Normalised n) {
  const int64_t row = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (row < p.key_rows()) gated_delta_rule_cuda::normalise_row(p, n, row);
}

__global__ void forward(Params p, Normalised n, float* o, float* final_state) {
  const int64_t index = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  float column[gated_delta_rule_cuda::kMaxKeyDim];
  if (index < p.columns()) gated_delta_rule_cuda::forward_column(p, n, index, column, o, final_state);
}

__global__ void key_rows(Params p, Workspace w, float* dq, float* dk) {
  const int64_t row = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (row < p.key_rows()) gated_delta_rule_cuda::key_row_gradients(p, w, row, dq, dk);
}

void launch_normalise(const Params& p, const Normalised& n, const char* op) {
  if (p.key_rows() == 0) return;
  normalise<<<blocks_for(p.key_rows()), kThreads, 0, cuda::lathe_stream()>>>(p, n);
  LATHE_CUDA_CHECK_LAUNCH(op);
}

void run_forward(const GatedDeltaRuleArgs& args, const GatedDeltaRuleCpuConfig&) {
  const Params p = gated_delta_rule_cuda::params_of(args);
  if (p.columns() == 0) return;
  const int64_t floats = gated_delta_rule_cuda::forward_floats(p);
  Tensor scratch = cuda::device_empty({floats > 0 ? floats : 1}, DType::f32, "gated_delta_rule normalised q and k");
  const Normalised n = gated_delta_rule_cuda::normalised_at(p, scratch.ptr<float>());
  launch_normalise(p, n, "gated_delta_rule (cuda): normalise q and k");
  forward<<<blocks_for(p.columns()), kThreads, 0, cuda::lathe_stream()>>>(p, n, static_cast<float*>(args.o.data),
                                                                          static_cast<float*>(args.final_state.data));
  LATHE_CUDA_CHECK_LAUNCH("gated_delta_rule (cuda)");
}

void run_backward(const GatedDeltaRuleBackwardArgs& args, const GatedDeltaRuleCpuConfig&) {
  const Params p = gated_delta_rule_cuda::params_of(args);
  const int64_t floats = gated_delta_rule_cuda::backward_floats(p);
  Tensor scratch = cuda::device_empty({floats > 0 ? floats : 1}, DType::f32, "gated_delta_rule_backward workspace");
  const Workspace w = gated_delta_rule_cuda::workspace_at(p, scratch.ptr<float>());
  launch_normalise(p, w.normalised, "gated_delta_rule_backward (cuda): normalise q and k");
  const gated_delta_rule_cuda::Backward sweep = gated_delta_rule_cuda::backward_of(args, p, w);
  const int64_t blocks = p.batch * p.value_heads;
  if (blocks > 0 && p.dv > 0) {
    const unsigned threads = static_cast<unsigned>((p.dv + cuda::kWarp - 1) / cuda::kWarp * cuda::kWarp);
    reverse_sweep_kernel<<<static_cast<unsigned>(blocks), threads, 0, cuda::lathe_stream()>>>(sweep);
    LATHE_CUDA_CHECK_LAUNCH("gated_delta_rule_backward (cuda): the reverse sweep");
  }
  if (p.key_rows() > 0 && p.dk > 0) {
    key_rows<<<blocks_for(p.key_rows()), kThreads, 0, cuda::lathe_stream()>>>(p, w, static_cast<float*>(args.dq.data),
                                                                              static_cast<float*>(args.dk.data));
    LATHE_CUDA_CHECK_LAUNCH("gated_delta_rule_backward (cuda): key rows");
  }
}

}  // namespace

Impl<GatedDeltaRuleArgs, GatedDeltaRuleCpuConfig> gated_delta_rule_cuda_impl() {
  auto impl = default_config_cuda_impl<GatedDeltaRuleArgs, GatedDeltaRuleCpuConfig>(run_forward);
  impl.supported = gated_delta_rule_cuda::forward_supported;
  return impl;
}

Impl<GatedDeltaRuleBackwardArgs, GatedDeltaRuleCpuConfig> gated_delta_rule_backward_cuda_impl() {
  auto impl = default_config_cuda_impl<GatedDeltaRuleBackwardArgs, GatedDeltaRuleCpuConfig>(run_backward);
  impl.supported = gated_delta_rule_cuda::backward_supported;
  return impl;
}

}  // namespace lathe
