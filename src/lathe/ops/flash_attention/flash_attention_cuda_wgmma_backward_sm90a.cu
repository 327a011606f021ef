// The tensor-core attention backward on Hopper's warpgroup MMA (wgmma, sm_90a): see
// flash_attention_cuda_mma.h for where it sits, flash_attention_cuda_wgmma_backward.cuh for the
// blocks' work and device/wgmma.cuh for the instructions.
#include <cuda_bf16.h>

#include <cstdint>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_wgmma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_wgmma_backward.cuh"

namespace lathe {
namespace {

using namespace mma;
using namespace mma::wgmma_backward;

template <int D>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    backward_dq_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* o,
                      const float* lse, const __nv_bfloat16* d_o, __nv_bfloat16* dq, float* delta, MmaShapes s) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  dq_block<D>(q, k, v, o, lse, d_o, dq, delta, s, shared_raw);
}

template <int D>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    backward_dkdv_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const float* lse,
                        const __nv_bfloat16* d_o, const float* delta, __nv_bfloat16* dk, __nv_bfloat16* dv,
                        MmaShapes s) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  dkdv_block<D>(q, k, v, lse, d_o, delta, dk, dv, s, shared_raw);
}

}  // namespace

bool flash_attention_backward_wgmma_applies(const FlashAttentionBackwardArgs& args) {
  return flash_attention_backward_mma_applies(args) && runs_sm90a();
}

void flash_attention_backward_wgmma(const FlashAttentionBackwardArgs& args) {
  const BackwardTensors t(args);
  constexpr const char* kOp = "flash_attention_backward (cuda, wgmma)";
  run_backward_kernels(args, [&]<int D>(const MmaShapes& s, int64_t batch, float* delta) {
    if (s.seq_q > 0) {  // first: the dk/dv kernel reads its D
      allow_shared_bytes(backward_dq_wgmma<D>, kSharedBytes<D>, kOp);
      backward_dq_wgmma<D><<<row_block_grid(s.seq_q, kBlockRows, s.n_heads, batch), kWgmmaThreads, kSharedBytes<D>,
                             cuda::lathe_stream()>>>(t.q, t.k, t.v, t.o, t.lse, t.d_o, t.dq, delta, s);
      LATHE_CUDA_CHECK_LAUNCH(kOp);
    }
    if (s.seq_k > 0) {
      allow_shared_bytes(backward_dkdv_wgmma<D>, kSharedBytes<D>, kOp);
      backward_dkdv_wgmma<D><<<row_block_grid(s.seq_k, kBlockRows, s.n_kv_heads, batch), kWgmmaThreads, kSharedBytes<D>,
                               cuda::lathe_stream()>>>(t.q, t.k, t.v, t.lse, t.d_o, delta, t.dk, t.dv, s);
      LATHE_CUDA_CHECK_LAUNCH(kOp);
    }
  });
}

}  // namespace lathe
