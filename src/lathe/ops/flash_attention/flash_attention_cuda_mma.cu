#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "lathe/core/error.h"
#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma_forward.cuh"

namespace lathe {
namespace {

using namespace mma;

// The block's work: flash_attention_cuda_mma_forward.cuh (shared with the host emulation).
template <int D>
__global__ void __launch_bounds__(kForwardThreads)
    forward_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o, float* lse,
                MmaShapes s) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  forward_mma_block<D>(q, k, v, o, lse, s, shared_bytes);
}

}  // namespace

bool flash_attention_mma_applies(const FlashAttentionArgs& args) {
  return mma_shapes_apply(args.q, args.v) && aligned(args.q.data, 4) && aligned(args.k.data, 16) &&
         aligned(args.v.data, 16) && aligned(args.o.data, 4);
}

bool flash_attention_wgmma_kernel_applies(const FlashAttentionArgs& args) {
  return flash_attention_mma_applies(args) && aligned(args.q.data, 16);
}

void flash_attention_forward_mma(const FlashAttentionArgs& args) {
  const MmaShapes s = mma_shapes(args.q, args.k, args.options);
  const int64_t batch = args.q.dim(0);
  if (batch == 0 || s.seq_q == 0 || s.n_heads == 0) return;
  const ForwardTensors t(args);
  constexpr const char* kOp = "flash_attention (cuda, tensor cores)";
  for_head_dim(args.q.dim(3), [&]<int D>() {
    constexpr int kBytes = kKeyValueStagesBytes<D, kForwardBlockK>;
    allow_shared_bytes(forward_mma<D>, kBytes, kOp);
    forward_mma<D>
        <<<row_block_grid(s.seq_q, kForwardBlockQ, s.n_heads, batch), kForwardThreads, kBytes, cuda::lathe_stream()>>>(
            t.q, t.k, t.v, t.o, t.lse, s);
  });
  LATHE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace lathe
