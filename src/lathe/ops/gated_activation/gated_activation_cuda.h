// The CUDA implementations of gated_activation and its backward (gated_activation_cuda.cu),
// registered by gated_activation.cc in builds with the CUDA backend: elementwise over strided rows
// (gate and up may be column slices of one fused projection), f32 or bf16, the CPU definitions of
// silu and gelu_tanh evaluated in f32. The kernels and their host steps:
// gated_activation_cuda_kernels.cuh; their host emulation (builds with the CUDA toolkit):
// gated_activation_cuda_emulated.cc, "cuda_emulated".
#pragma once

#include "lathe/ops/gated_activation/gated_activation.h"

namespace lathe {

Impl<GatedActivationArgs, GatedActivationCpuConfig> gated_activation_cuda_impl();
Impl<GatedActivationBackwardArgs, GatedActivationCpuConfig> gated_activation_backward_cuda_impl();
std::vector<Impl<GatedActivationArgs, GatedActivationCpuConfig>> gated_activation_cuda_emulated_impls();
std::vector<Impl<GatedActivationBackwardArgs, GatedActivationCpuConfig>>
gated_activation_backward_cuda_emulated_impls();

}  // namespace lathe
