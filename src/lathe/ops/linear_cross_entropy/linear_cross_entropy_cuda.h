// The CUDA implementation of linear_cross_entropy (linear_cross_entropy_cuda.cu), registered by
// linear_cross_entropy.cc in builds with the CUDA backend. Token chunks of at most 2^26 logits
// (256 MB in f32) at a time, so the tokens x vocab matrix is never whole:
//   logits = hidden_chunk @ weight^T            (matmul op: cuBLASLt, f32 output)
//   one block per token: scale and soft-cap, logsumexp, the token's loss (and z-loss), then the
//     gradient of the raw dot products in place (bf16 inputs: written as bf16, as PyTorch's bf16
//     autocast keeps the logits' gradient)
//   dhidden_chunk = dlogits @ weight; dweight (+)= dlogits^T @ hidden_chunk   (matmul op)
// The loss is the sum of the per-token losses in token order by one block (deterministic). The
// number of valid tokens is counted on the host from a copy of the targets (validation already
// reads them). The config is not used on the GPU: its space is the default alone.
#pragma once

#include "lathe/ops/linear_cross_entropy/linear_cross_entropy.h"

namespace lathe {

Impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig> linear_cross_entropy_cuda_impl();

}  // namespace lathe
