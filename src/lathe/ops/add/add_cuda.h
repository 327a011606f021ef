// The CUDA implementation of add (add_cuda.cu), registered by add.cc in builds with the CUDA
// backend: one elementwise pass, out = fma(alpha, b, a) in f32 as the CPU kernel computes it (bf16
// rounded to nearest-even), so both give the same bits. In place (out aliasing a or b) is safe:
// each element is read before it is written, by the same thread.
// The kernel and its host step: add_cuda_kernels.cuh; its host emulation (builds with the CUDA
// toolkit): add_cuda_emulated.cc, "cuda_emulated".
#pragma once

#include "lathe/ops/add/add.h"

namespace lathe {

Impl<AddArgs, AddCpuConfig> add_cuda_impl();
std::vector<Impl<AddArgs, AddCpuConfig>> add_cuda_emulated_impls();

}  // namespace lathe
