// The CUDA implementations of rms_norm and rms_norm_backward (rms_norm_cuda.cu), registered by
// rms_norm.cc in builds with the CUDA backend: one block per row, the sum of squares reduced in
// f32 by a fixed tree (deterministic); dweight in two passes, partial sums over chunks of 64 rows
// then the chunks in order, one thread per column each (deterministic). f32 and bf16 rows. The
// config (rows_per_task) is not used on the GPU: its space is the default alone. The kernels and
// their host steps: rms_norm_cuda_kernels.cuh; their host emulation (builds with the CUDA toolkit):
// rms_norm_cuda_emulated.cc, "cuda_emulated" and "cuda_loop_emulated".
#pragma once

#include "lathe/ops/rms_norm/rms_norm.h"

namespace lathe {

Impl<RmsNormArgs, RmsNormCpuConfig> rms_norm_cuda_impl();
Impl<RmsNormBackwardArgs, RmsNormCpuConfig> rms_norm_backward_cuda_impl();
std::vector<Impl<RmsNormArgs, RmsNormCpuConfig>> rms_norm_cuda_emulated_impls();
std::vector<Impl<RmsNormBackwardArgs, RmsNormCpuConfig>> rms_norm_backward_cuda_emulated_impls();

}  // namespace lathe
