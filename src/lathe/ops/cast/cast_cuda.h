// The CUDA implementation of cast (cast_cuda.cu), registered by cast.cc in builds with the CUDA
// backend: one elementwise pass, bf16 rounded to nearest-even by __float2bfloat16_rn (the CPU
// kernels' rounding, so both give the same bits).
#pragma once

#include "lathe/ops/cast/cast.h"

namespace lathe {

Impl<CastArgs, CastCpuConfig> cast_cuda_impl();

}  // namespace lathe
