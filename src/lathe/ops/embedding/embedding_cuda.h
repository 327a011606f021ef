// The CUDA implementations of embedding and embedding_backward (embedding_cuda.cu), registered by
// embedding.cc in builds with the CUDA backend.
//   forward:  one block per token copies (and scales) its table row.
//   backward: deterministic without atomics, as on the CPU: the ids are sorted with their token
//             indices by CUB's stable radix sort, so each vocabulary row's tokens form one run in
//             token order; one block per run sums its d_out rows in that order and writes the row
//             once. dtable is zeroed first (rows of ids that do not occur).
// The ids are checked against the vocabulary on the host before the kernel (validate copies
// device ids back), so the error names the position and value as on the CPU. The configs are not
// used on the GPU: their spaces are the defaults alone. The kernels and host steps:
// embedding_cuda_kernels.cuh; their host emulation (builds with the CUDA toolkit):
// embedding_cuda_emulated.cc, "cuda_emulated".
#pragma once

#include "lathe/ops/embedding/embedding.h"

namespace lathe {

Impl<EmbeddingArgs, EmbeddingCpuConfig> embedding_cuda_impl();
Impl<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig> embedding_backward_cuda_impl();
std::vector<Impl<EmbeddingArgs, EmbeddingCpuConfig>> embedding_cuda_emulated_impls();
std::vector<Impl<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig>> embedding_backward_cuda_emulated_impls();

}  // namespace lathe
