// The CUDA implementation of adamw (adamw_cuda.cu), registered by adamw.cc in builds with the CUDA
// backend: one elementwise pass with the CPU kernel's arithmetic (adamw_cuda_body.h), so results do
// not depend on the launch shape. adamw_cuda_many is adamw_many's GPU path: one launch per up to
// adamw_cuda::kBatch tensors, each tensor's elements exactly as one adamw call updates them.
#pragma once

#include <vector>

#include "lathe/ops/adamw/adamw.h"

namespace lathe {

Impl<AdamWArgs, AdamWCpuConfig> adamw_cuda_impl();

// Every step's tensors on the GPU, already validated.
void adamw_cuda_many(const std::vector<AdamWArgs>& steps);

}  // namespace lathe
