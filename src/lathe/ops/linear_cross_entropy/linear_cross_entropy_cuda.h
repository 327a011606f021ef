// The CUDA implementation of linear_cross_entropy (linear_cross_entropy_cuda.cu), registered by
// linear_cross_entropy.cc in builds with the CUDA backend. Token chunks of at most 2^26 logits
// (256 MB in f32) at a time, so the tokens x vocab matrix is never whole:
//   logits = hidden_chunk @ weight^T            (matmul op: cuBLASLt, f32 output)
//   one block per token: scale and soft-cap, logsumexp, the token's loss (and z-loss), then the
//     gradient of the raw dot products in place, in f32
//   dhidden_chunk = dlogits @ weight; dweight (+)= dlogits^T @ hidden_chunk   (matmul op); with
//     bf16 inputs dlogits enters as three bf16 parts (matmul_cuda_split.cuh), one
//     tensor-core product each, so the gradients keep f32 accuracy (the op's tolerance rule; one
//     bf16 dlogits, as PyTorch's autocast keeps it, failed it on the first GPU run)
// The loss is the sum of the per-token losses in token order by one block (deterministic). The
// number of valid tokens is counted on the host from a copy of the targets (validation already
// reads them). The config is not used on the GPU: its space is the default alone. The kernels and
// host steps: linear_cross_entropy_cuda_kernels.cuh; their host emulation (builds with the CUDA
// toolkit): linear_cross_entropy_cuda_emulated.cc, "cuda_emulated" and "cuda_chunked_emulated".
#pragma once

#include "lathe/ops/linear_cross_entropy/linear_cross_entropy.h"

namespace lathe {

Impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig> linear_cross_entropy_cuda_impl();
std::vector<Impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig>> linear_cross_entropy_cuda_emulated_impls();

}  // namespace lathe
