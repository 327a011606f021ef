// The CUDA implementations of short_conv and its backward (short_conv_cuda.cu), registered by
// short_conv.cc in builds with the CUDA backend: one thread per output element running
// short_conv_cuda_body.h (which the "cuda_emulated" implementation runs on the host).
#pragma once

#include "lathe/ops/short_conv/short_conv.h"

namespace lathe {

Impl<ShortConvArgs, ShortConvCpuConfig> short_conv_cuda_impl();
Impl<ShortConvBackwardArgs, ShortConvCpuConfig> short_conv_backward_cuda_impl();

}  // namespace lathe
