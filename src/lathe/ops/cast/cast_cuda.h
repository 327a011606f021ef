// The CUDA implementation of cast (cast_cuda.cu), registered by cast.cc in builds with the CUDA
// backend: one elementwise pass, bf16 rounded to nearest-even by __float2bfloat16_rn (the CPU
// kernels' rounding, so both give the same bits).
// The kernel and its host step: cast_cuda_kernels.cuh; its host emulation (builds with the CUDA
// toolkit): cast_cuda_emulated.cc, "cuda_emulated".
#pragma once

#include "lathe/ops/cast/cast.h"

namespace lathe {

Impl<CastArgs, CastCpuConfig> cast_cuda_impl();
std::vector<Impl<CastArgs, CastCpuConfig>> cast_cuda_emulated_impls();

}  // namespace lathe
