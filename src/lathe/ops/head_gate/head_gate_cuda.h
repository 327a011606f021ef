// The CUDA implementations of head_gate and its backward (head_gate_cuda.cu), registered by
// head_gate.cc in builds with the CUDA backend: one thread per index of head_gate_cuda_body.h
// (which the CPU kernels and "cuda_emulated" run on the host).
#pragma once

#include "lathe/ops/head_gate/head_gate.h"

namespace lathe {

Impl<HeadGateArgs, HeadGateCpuConfig> head_gate_cuda_impl();
Impl<HeadGateBackwardArgs, HeadGateCpuConfig> head_gate_backward_cuda_impl();

}  // namespace lathe
