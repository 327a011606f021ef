// The CUDA implementations of moe_permute and moe_permute_backward (moe_permute_cuda.cu),
// registered by moe_permute.cc in builds with the CUDA backend: the kernels of
// moe_permute_cuda_body.h (which the "cuda_emulated" implementation runs on the host): the
// counting sort in one block of 256 threads, then one thread per copied or summed element.
// The same offsets, source and destination as the CPU (a stable sort), the same bits.
#pragma once

#include "lathe/ops/moe_permute/moe_permute.h"

namespace lathe {

Impl<MoePermuteArgs, MoePermuteCpuConfig> moe_permute_cuda_impl();
Impl<MoePermuteBackwardArgs, MoePermuteBackwardCpuConfig> moe_permute_backward_cuda_impl();

}  // namespace lathe
