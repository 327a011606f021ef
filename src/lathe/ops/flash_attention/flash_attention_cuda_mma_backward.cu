#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.cuh"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma_backward.cuh"

namespace lathe {
namespace {

using namespace mma;

// The blocks' work: flash_attention_cuda_mma_backward.cuh (shared with the host emulation).
template <int D>
__global__ void __launch_bounds__(kBackwardThreads)
    backward_dq_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const __nv_bfloat16* o,
                    const float* lse, const __nv_bfloat16* d_o, __nv_bfloat16* dq, float* delta, MmaShapes s) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  backward_dq_mma_block<D>(q, k, v, o, lse, d_o, dq, delta, s, shared_bytes);
}

template <int D>
__global__ void __launch_bounds__(kBackwardThreads)
    backward_dkdv_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const float* lse,
                      const __nv_bfloat16* d_o, const float* delta, __nv_bfloat16* dk, __nv_bfloat16* dv, MmaShapes s) {
  __shared__ __align__(16) DkdvShared<D> shared;
  backward_dkdv_mma_block<D>(q, k, v, lse, d_o, delta, dk, dv, s, shared);
}

}  // namespace

bool flash_attention_backward_mma_applies(const FlashAttentionBackwardArgs& args) {
  return mma_shapes_apply(args.q, args.v) && aligned(args.q.data, 16) && aligned(args.k.data, 16) &&
         aligned(args.v.data, 16) && aligned(args.d_o.data, 16) && aligned(args.o.data, 4) &&
         aligned(args.dq.data, 4) && aligned(args.dk.data, 4) && aligned(args.dv.data, 4);
}

void flash_attention_backward_mma(const FlashAttentionBackwardArgs& args) {
  const BackwardTensors t(args);
  constexpr const char* kOp = "flash_attention_backward (cuda, tensor cores)";
  run_backward_kernels(args, [&]<int D>(const MmaShapes& s, int64_t batch, float* delta) {
    if (s.seq_q > 0) {  // first: the dk/dv kernel reads its D
      constexpr int kBytes = kKeyValueStagesBytes<D, kBackwardBlockK>;
      allow_shared_bytes(backward_dq_mma<D>, kBytes, kOp);
      backward_dq_mma<D><<<row_block_grid(s.seq_q, kBackwardBlockRows, s.n_heads, batch), kBackwardThreads, kBytes,
                           cuda::lathe_stream()>>>(t.q, t.k, t.v, t.o, t.lse, t.d_o, t.dq, delta, s);
      LATHE_CUDA_CHECK_LAUNCH(kOp);
    }
    if (s.seq_k > 0) {
      backward_dkdv_mma<D><<<row_block_grid(s.seq_k, kBackwardBlockRows, s.n_kv_heads, batch), kBackwardThreads, 0,
                             cuda::lathe_stream()>>>(t.q, t.k, t.v, t.lse, t.d_o, delta, t.dk, t.dv, s);
      LATHE_CUDA_CHECK_LAUNCH(kOp);
    }
  });
}

}  // namespace lathe
