// The CUDA implementations of ssd_scan and its backward (ssd_scan_cuda.cu), registered by
// ssd_scan.cc in builds with the CUDA backend: the token-by-token recurrence of
// ssd_scan_cuda_body.h, one thread per state row (which the "cuda_emulated" implementation runs on
// the host). Supported: state (N) <= 256 for the forward, head_dim (P) <= 1024 for the backward.
#pragma once

#include "lathe/ops/ssd_scan/ssd_scan.h"

namespace lathe {

Impl<SsdScanArgs, SsdScanCpuConfig> ssd_scan_cuda_impl();
Impl<SsdScanBackwardArgs, SsdScanCpuConfig> ssd_scan_backward_cuda_impl();

}  // namespace lathe
