#include <cmath>

#include "lathe/core/error.h"
#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/flash_attention/flash_attention_cuda.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_mma.h"
#include "lathe/ops/flash_attention/flash_attention_cuda_rows.cuh"

namespace lathe {
namespace {

using namespace attention_rows;

// The per-thread work: flash_attention_cuda_rows.cuh (shared with the host emulation).
__global__ void forward_rows(const void* q, const void* k, const void* v, void* o, float* lse, Shapes s) {
  forward_rows_thread(q, k, v, o, lse, s);
}
__global__ void backward_dq(const void* q, const void* k, const void* v, const void* o, const float* lse,
                            const void* d_o, void* dq, float* delta, Shapes s) {
  backward_dq_thread(q, k, v, o, lse, d_o, dq, delta, s);
}
__global__ void backward_dkdv(const void* q, const void* k, const void* v, const float* lse, const void* d_o,
                              const float* delta, void* dk, void* dv, Shapes s) {
  backward_dkdv_thread(q, k, v, lse, d_o, delta, dk, dv, s);
}

bool tensor_core_config(const FlashAttentionCpuConfig& config) {
  return config.block_q == kFlashCudaTensorCoreConfig.block_q || config.block_q == kFlashCudaWgmmaConfig.block_q;
}

void run_forward(const FlashAttentionArgs& args, const FlashAttentionCpuConfig& config) {
  if (config.block_q == kFlashCudaWgmmaConfig.block_q && flash_attention_wgmma_applies(args))
    return flash_attention_forward_wgmma(args);
  if (tensor_core_config(config) && flash_attention_mma_applies(args)) return flash_attention_forward_mma(args);
  const Shapes s = shapes_of("flash_attention", args.q, args.k, args.v, args.options);
  if (s.batch == 0 || s.seq_q == 0 || s.n_heads == 0) return;
  forward_rows<<<row_grid(s.seq_q, s.n_heads, s.batch), kWarpsPerBlock * cuda::kWarp, 0, cuda::lathe_stream()>>>(
      args.q.data, args.k.data, args.v.data, args.o.data, static_cast<float*>(args.lse.data), s);
  LATHE_CUDA_CHECK_LAUNCH("flash_attention (cuda)");
}

void run_backward(const FlashAttentionBackwardArgs& args, const FlashAttentionCpuConfig& config) {
  if (config.block_q == kFlashCudaWgmmaConfig.block_q && flash_attention_backward_wgmma_applies(args))
    return flash_attention_backward_wgmma(args);
  if (tensor_core_config(config) && flash_attention_backward_mma_applies(args))
    return flash_attention_backward_mma(args);
  constexpr const char* kOp = "flash_attention_backward (cuda)";
  const Shapes s = shapes_of("flash_attention_backward", args.q, args.k, args.v, args.options);
  if (s.batch == 0 || s.n_heads == 0) return;
  const unsigned threads = kWarpsPerBlock * cuda::kWarp;
  Tensor delta = cuda::device_empty({s.batch, s.n_heads, s.seq_q}, DType::f32, "flash_attention_backward D");
  if (s.seq_q > 0) {
    backward_dq<<<row_grid(s.seq_q, s.n_heads, s.batch), threads, 0, cuda::lathe_stream()>>>(
        args.q.data, args.k.data, args.v.data, args.o.data, static_cast<const float*>(args.lse.data), args.d_o.data,
        args.dq.data, static_cast<float*>(delta.view().data), s);
    LATHE_CUDA_CHECK_LAUNCH(kOp);
  }
  if (s.seq_k > 0) {
    backward_dkdv<<<row_grid(s.seq_k, s.n_kv_heads, s.batch), threads, 0, cuda::lathe_stream()>>>(
        args.q.data, args.k.data, args.v.data, static_cast<const float*>(args.lse.data), args.d_o.data,
        static_cast<const float*>(delta.view().data), args.dk.data, args.dv.data, s);
    LATHE_CUDA_CHECK_LAUNCH(kOp);
  }
}

}  // namespace

Impl<FlashAttentionArgs, FlashAttentionCpuConfig> flash_attention_cuda_impl() {
  Impl<FlashAttentionArgs, FlashAttentionCpuConfig> impl =
      default_config_cuda_impl<FlashAttentionArgs, FlashAttentionCpuConfig>(run_forward);
  // The CUDA-core kernel stays the default until a device check has passed the tensor-core one
  // (docs/cuda.md); the contract tests check both wherever a GPU is usable.
  impl.heuristic = [](const FlashAttentionArgs&) { return kFlashCudaRowConfig; };
  impl.space = [](const FlashAttentionArgs&) {
    return std::vector<FlashAttentionCpuConfig>{kFlashCudaRowConfig, kFlashCudaTensorCoreConfig, kFlashCudaWgmmaConfig};
  };
  return impl;
}
Impl<FlashAttentionBackwardArgs, FlashAttentionCpuConfig> flash_attention_backward_cuda_impl() {
  Impl<FlashAttentionBackwardArgs, FlashAttentionCpuConfig> impl =
      default_config_cuda_impl<FlashAttentionBackwardArgs, FlashAttentionCpuConfig>(run_backward);
  impl.heuristic = [](const FlashAttentionBackwardArgs&) { return kFlashCudaRowConfig; };  // as the forward's
  impl.space = [](const FlashAttentionBackwardArgs&) {
    return std::vector<FlashAttentionCpuConfig>{kFlashCudaRowConfig, kFlashCudaTensorCoreConfig, kFlashCudaWgmmaConfig};
  };
  return impl;
}

}  // namespace lathe
