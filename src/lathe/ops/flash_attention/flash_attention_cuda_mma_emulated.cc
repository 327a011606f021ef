// The tensor-core attention kernels (mma.sync: the forward, the backward's dq and dk/dv kernels)
// run on the host: the kernels' own block functions (flash_attention_cuda_mma_forward.cuh,
// flash_attention_cuda_mma_backward.cuh) compiled by the host compiler, their ldmatrix, mma.sync,
// cp.async and shuffles the warp collectives of device/simt_emulation.h, launched over the same
// grids as on the GPU. Registered as flash_attention's and flash_attention_backward's
// "cuda_mma_emulated" implementations in builds with the CUDA toolkit (its headers give bf16 on the
// host), so the op contract tests check the kernels' fragments, masks and pipelines on every such
// machine, GPU or not (docs/cuda.md).
#include "lathe/ops/flash_attention/flash_attention_cuda_mma_emulated.h"

#if LATHE_HAVE_CUDA

#include <vector>

#include "lathe/device/simt_emulation.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma_backward.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma_forward.cuh"

namespace lathe {

bool flash_attention_mma_emulation_applies(const FlashAttentionArgs& args) { return flash_attention_mma_applies(args); }

void flash_attention_forward_mma_emulated(const FlashAttentionArgs& args, const FlashAttentionCpuConfig&) {
  using namespace mma;
  const MmaShapes s = mma_shapes(args.q, args.k, args.options);
  const int64_t batch = args.q.dim(0);
  if (batch == 0 || s.seq_q == 0 || s.n_heads == 0) return;
  const ForwardTensors t(args);
  for_head_dim(args.q.dim(3), [&]<int D>() {
    const dim3 grid = row_block_grid(s.seq_q, kForwardBlockQ, s.n_heads, batch);
    simt::launch({grid.x, grid.y, grid.z}, {kForwardThreads, 1, 1}, kKeyValueStagesBytes<D, kForwardBlockK>,
                 [&](unsigned char* shared) { forward_mma_block<D>(t.q, t.k, t.v, t.o, t.lse, s, shared); });
  });
}

bool flash_attention_backward_mma_emulation_applies(const FlashAttentionBackwardArgs& args) {
  return flash_attention_backward_mma_applies(args);
}

// As flash_attention_backward_mma: the dq kernel (which writes D), then the dk/dv kernel.
void flash_attention_backward_mma_emulated(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig&) {
  using namespace mma;
  const MmaShapes s = mma_shapes(args.q, args.k, args.options);
  const int64_t batch = args.q.dim(0);
  if (batch == 0 || s.n_heads == 0) return;
  const BackwardTensors t(args);
  std::vector<float> delta(static_cast<size_t>(batch * s.n_heads * s.seq_q));  // (batch, n_heads, seq_q)
  for_head_dim(args.q.dim(3), [&]<int D>() {
    if (s.seq_q > 0) {
      const dim3 grid = row_block_grid(s.seq_q, kBackwardBlockRows, s.n_heads, batch);
      simt::launch({grid.x, grid.y, grid.z}, {kBackwardThreads, 1, 1}, kKeyValueStagesBytes<D, kBackwardBlockK>,
                   [&](unsigned char* shared) {
                     backward_dq_mma_block<D>(t.q, t.k, t.v, t.o, t.lse, t.d_o, t.dq, delta.data(), s, shared);
                   });
    }
    if (s.seq_k > 0) {
      const dim3 grid = row_block_grid(s.seq_k, kBackwardBlockRows, s.n_kv_heads, batch);
      simt::launch({grid.x, grid.y, grid.z}, {kBackwardThreads, 1, 1}, sizeof(DkdvShared<D>),
                   [&](unsigned char* shared) {
                     backward_dkdv_mma_block<D>(t.q, t.k, t.v, t.lse, t.d_o, delta.data(), t.dk, t.dv, s,
                                                *reinterpret_cast<DkdvShared<D>*>(shared));
                   });
    }
  });
}

}  // namespace lathe

#endif
