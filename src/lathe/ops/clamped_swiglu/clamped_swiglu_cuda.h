// The CUDA implementations of clamped_swiglu and its backward (clamped_swiglu_cuda.cu), registered
// by clamped_swiglu.cc in builds with the CUDA backend: one thread per output element running
// clamped_swiglu_cuda_body.h (which the "cuda_emulated" implementation runs on the host).
#pragma once

#include "lathe/ops/clamped_swiglu/clamped_swiglu.h"

namespace lathe {

Impl<ClampedSwigluArgs, ClampedSwigluConfig> clamped_swiglu_cuda_impl();
Impl<ClampedSwigluBackwardArgs, ClampedSwigluConfig> clamped_swiglu_backward_cuda_impl();

}  // namespace lathe
