// The CUDA implementation of adamw (adamw_cuda.cu), registered by adamw.cc in builds with the CUDA
// backend: one elementwise pass with the CPU kernel's arithmetic (bias corrections once per call
// in double, the update in f32 with fused multiply-adds), so results do not depend on the launch
// shape. Multi-tensor steps (one launch over many parameters) come with the trainer on the GPU.
#pragma once

#include "lathe/ops/adamw/adamw.h"

namespace lathe {

Impl<AdamWArgs, AdamWCpuConfig> adamw_cuda_impl();

}  // namespace lathe
