// The CUDA implementations of gated_rms_norm and its backward (gated_rms_norm_cuda.cu), registered
// by gated_rms_norm.cc in builds with the CUDA backend: one thread per index of
// gated_rms_norm_cuda_body.h (which the CPU kernels and "cuda_emulated" run on the host).
#pragma once

#include "lathe/ops/gated_rms_norm/gated_rms_norm.h"

namespace lathe {

Impl<GatedRmsNormArgs, GatedRmsNormConfig> gated_rms_norm_cuda_impl();
Impl<GatedRmsNormBackwardArgs, GatedRmsNormConfig> gated_rms_norm_backward_cuda_impl();

}  // namespace lathe
