// The CUDA implementations of softmax and softmax_backward (softmax_cuda.cu), registered by
// softmax.cc in builds with the CUDA backend: one block per row, max and sum reduced in f32 by a
// fixed tree (deterministic), f32 and bf16 rows; a fully masked row (all -inf) gives zeros, as on
// the CPU. The CPU config is not used on the GPU: its space is the default alone. The kernels and
// their host steps: softmax_cuda_kernels.cuh; their host emulation (builds with the CUDA toolkit):
// softmax_cuda_emulated.cc, "cuda_emulated" and "cuda_loop_emulated".
#pragma once

#include "lathe/ops/softmax/softmax.h"

namespace lathe {

Impl<SoftmaxArgs, SoftmaxCpuConfig> softmax_cuda_impl();
Impl<SoftmaxBackwardArgs, SoftmaxCpuConfig> softmax_backward_cuda_impl();
std::vector<Impl<SoftmaxArgs, SoftmaxCpuConfig>> softmax_cuda_emulated_impls();
std::vector<Impl<SoftmaxBackwardArgs, SoftmaxCpuConfig>> softmax_backward_cuda_emulated_impls();

}  // namespace lathe
