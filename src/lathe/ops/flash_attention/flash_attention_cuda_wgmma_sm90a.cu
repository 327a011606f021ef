// The tensor-core attention forward on Hopper's warpgroup MMA (wgmma, sm_90a): see
// flash_attention_cuda_mma.h for where it sits, flash_attention_cuda_wgmma_forward.cuh for the
// block's work and device/wgmma.cuh for the instructions.
#include <cuda_bf16.h>

#include <cstdint>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_wgmma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_wgmma_forward.cuh"

namespace lathe {
namespace {

using namespace mma;
using namespace mma::wgmma_forward;

template <int D>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    forward_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o, float* lse,
                  MmaShapes s) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  forward_block<D>(q, k, v, o, lse, s, shared_raw);
}

}  // namespace

bool flash_attention_wgmma_applies(const FlashAttentionArgs& args) {
  return flash_attention_wgmma_kernel_applies(args) && runs_sm90a();
}

void flash_attention_forward_wgmma(const FlashAttentionArgs& args) {
  const MmaShapes s = mma_shapes(args.q, args.k, args.options);
  const int64_t batch = args.q.dim(0);
  if (batch == 0 || s.seq_q == 0 || s.n_heads == 0) return;
  const ForwardTensors t(args);
  constexpr const char* kOp = "flash_attention (cuda, wgmma)";
  for_head_dim(args.q.dim(3), [&]<int D>() {
    allow_shared_bytes(forward_wgmma<D>, kSharedBytes<D>, kOp);
    forward_wgmma<D>
        <<<row_block_grid(s.seq_q, kBlockQ, s.n_heads, batch), kWgmmaThreads, kSharedBytes<D>, cuda::lathe_stream()>>>(
            t.q, t.k, t.v, t.o, t.lse, s);
  });
  LATHE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace lathe
