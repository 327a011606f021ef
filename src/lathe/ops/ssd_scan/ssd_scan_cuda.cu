#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/ssd_scan/ssd_scan_cuda.h"
#include "lathe/ops/ssd_scan/ssd_scan_cuda_body.h"

namespace lathe {
namespace {

using ssd_scan_cuda::Params;
using ssd_scan_cuda::Workspace;

constexpr int kThreads = 128;

__global__ void forward(Params p, float* y, float* final_state) {
  const int64_t row = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  float state_row[ssd_scan_cuda::kMaxStateDim];
  if (row < p.rows()) ssd_scan_cuda::forward_row(p, row, state_row, y, final_state);
}

__global__ void group_sums(Params p, Workspace w, float* db, float* dc) {
  const int64_t index = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (index < p.batch * p.seq * p.groups * p.state) ssd_scan_cuda::group_sums(p, w, index, db, dc);
}

__global__ void head_sums(Params p, Workspace w, float* da, float* dd) {
  const int64_t h = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (h < p.heads) ssd_scan_cuda::head_sums(p, w, h, da, dd);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

void run_forward(const SsdScanArgs& args, const SsdScanCpuConfig&) {
  const Params p = ssd_scan_cuda::params_of(args);
  if (p.rows() == 0) return;
  forward<<<blocks_for(p.rows()), kThreads, 0, cuda::lathe_stream()>>>(p, static_cast<float*>(args.y.data),
                                                                       static_cast<float*>(args.final_state.data));
  LATHE_CUDA_CHECK_LAUNCH("ssd_scan (cuda)");
}

void run_backward(const SsdScanBackwardArgs& args, const SsdScanCpuConfig&) {
  const Params p = ssd_scan_cuda::params_of(args);
  if (p.heads == 0) return;
  const int64_t floats = ssd_scan_cuda::workspace_floats(p);
  Tensor scratch = cuda::device_empty({floats > 0 ? floats : 1}, DType::f32, "ssd_scan_backward workspace");
  const Workspace w = ssd_scan_cuda::workspace_at(p, scratch.ptr<float>());
  const ssd_scan_cuda::Backward sweep = ssd_scan_cuda::backward_of(args, p, w);
  const int64_t blocks = p.batch * p.heads;
  if (blocks > 0 && p.head_dim > 0) {
    const unsigned threads = static_cast<unsigned>((p.head_dim + cuda::kWarp - 1) / cuda::kWarp * cuda::kWarp);
    reverse_sweep_kernel<<<static_cast<unsigned>(blocks), threads, 0, cuda::lathe_stream()>>>(sweep);
    LATHE_CUDA_CHECK_LAUNCH("ssd_scan_backward (cuda): the reverse sweep");
  }
  const int64_t group_entries = p.batch * p.seq * p.groups * p.state;
  if (group_entries > 0) {
    group_sums<<<blocks_for(group_entries), kThreads, 0, cuda::lathe_stream()>>>(
        p, w, static_cast<float*>(args.db.data), static_cast<float*>(args.dc.data));
    LATHE_CUDA_CHECK_LAUNCH("ssd_scan_backward (cuda): group sums");
  }
  head_sums<<<blocks_for(p.heads), kThreads, 0, cuda::lathe_stream()>>>(p, w, static_cast<float*>(args.da.data),
                                                                        static_cast<float*>(args.dd.data));
  LATHE_CUDA_CHECK_LAUNCH("ssd_scan_backward (cuda): head sums");
}

}  // namespace

Impl<SsdScanArgs, SsdScanCpuConfig> ssd_scan_cuda_impl() {
  Impl<SsdScanArgs, SsdScanCpuConfig> impl = default_config_cuda_impl<SsdScanArgs, SsdScanCpuConfig>(run_forward);
  impl.supported = ssd_scan_cuda::forward_supported;
  return impl;
}

Impl<SsdScanBackwardArgs, SsdScanCpuConfig> ssd_scan_backward_cuda_impl() {
  Impl<SsdScanBackwardArgs, SsdScanCpuConfig> impl =
      default_config_cuda_impl<SsdScanBackwardArgs, SsdScanCpuConfig>(run_backward);
  impl.supported = ssd_scan_cuda::backward_supported;
  return impl;
}

}  // namespace lathe
