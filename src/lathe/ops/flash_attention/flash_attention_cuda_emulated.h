// The CUDA implementation's attention kernels run on the host under device/simt_emulation.h
// (builds with the CUDA toolkit only; flash_attention_cuda_emulated.cc): the tensor-core (mma.sync)
// kernels, Hopper's warpgroup-MMA (wgmma) kernels and the CUDA-core (a warp per row) kernels.
#pragma once

#include "lathe/ops/flash_attention/flash_attention.h"

namespace lathe {

#if LATHE_HAVE_CUDA
// The mma.sync forward's kernel, block after block on the calling thread, for the arguments
// flash_attention_mma_applies takes; the config is unused.
void flash_attention_forward_mma_emulated(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config);
// The same for the backward (flash_attention_backward_mma_applies; its dq and dk/dv kernels).
void flash_attention_backward_mma_emulated(const FlashAttentionBackwardArgs& args,
                                           const FlashAttentionCpuConfig& config);
// Hopper's warpgroup-MMA forward and backward (flash_attention_wgmma_kernel_applies,
// flash_attention_backward_mma_applies): wgmma and the named barriers emulated too.
void flash_attention_forward_wgmma_emulated(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config);
void flash_attention_backward_wgmma_emulated(const FlashAttentionBackwardArgs& args,
                                             const FlashAttentionCpuConfig& config);
// The CUDA-core kernels, for the arguments they take up to a size the emulation runs quickly.
bool flash_attention_rows_emulation_applies(const FlashAttentionArgs& args);
void flash_attention_forward_rows_emulated(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config);
bool flash_attention_backward_rows_emulation_applies(const FlashAttentionBackwardArgs& args);
void flash_attention_backward_rows_emulated(const FlashAttentionBackwardArgs& args,
                                            const FlashAttentionCpuConfig& config);
#endif

}  // namespace lathe
