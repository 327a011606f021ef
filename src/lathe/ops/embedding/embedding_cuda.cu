#include <algorithm>
#include <bit>
#include <cub/device/device_radix_sort.cuh>

#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/embedding/embedding_cuda.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

__global__ void embedding_forward(const void* table, const void* ids, void* out, int64_t dim, float scale, bool ids_i64,
                                  bool bf16) {
  const int64_t t = blockIdx.x, row = cuda::load_index(ids, t, ids_i64);
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
    cuda::store_f32(out, t * dim + d, cuda::load_f32(table, row * dim + d, bf16) * scale, bf16);
}

// keys[t] = ids[t] (validated to lie in [0, vocab), so they fit 32 bits), tokens[t] = t.
__global__ void sort_inputs(const void* ids, uint32_t* keys, int32_t* tokens, int64_t count, bool ids_i64) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= count) return;
  keys[t] = static_cast<uint32_t>(cuda::load_index(ids, t, ids_i64));
  tokens[t] = static_cast<int32_t>(t);
}

// Block p starts a run when sorted_keys[p] differs from its predecessor; it sums the run's d_out
// rows in token order (the sort is stable) into dtable[key].
__global__ void sum_runs(const uint32_t* sorted_keys, const int32_t* sorted_tokens, const void* d_out, float* dtable,
                         int64_t count, int64_t dim, float scale, bool bf16) {
  const int64_t p = blockIdx.x;
  const uint32_t key = sorted_keys[p];
  if (p > 0 && sorted_keys[p - 1] == key) return;
  int64_t end = p + 1;
  while (end < count && sorted_keys[end] == key) ++end;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    float sum = 0.0f;
    for (int64_t q = p; q < end; ++q) sum += cuda::load_f32(d_out, sorted_tokens[q] * dim + d, bf16);
    dtable[static_cast<int64_t>(key) * dim + d] = sum * scale;
  }
}

void run_forward(const EmbeddingArgs& args, const EmbeddingCpuConfig&) {
  const int64_t tokens = args.ids.dim(0);
  if (tokens == 0) return;
  embedding_forward<<<static_cast<unsigned>(tokens), kThreads, 0, cuda::lathe_stream()>>>(
      args.table.data, args.ids.data, args.out.data, args.table.dim(1), args.scale, args.ids.dtype == DType::i64,
      args.table.dtype == DType::bf16);
  LATHE_CUDA_CHECK_LAUNCH("embedding (cuda)");
}

void run_backward(const EmbeddingBackwardArgs& args, const EmbeddingBackwardCpuConfig&) {
  constexpr const char* kOp = "embedding_backward (cuda)";
  const int64_t tokens = args.ids.dim(0), vocab = args.dtable.dim(0), dim = args.dtable.dim(1);
  cudaStream_t stream = cuda::lathe_stream();
  if (args.dtable.numel() > 0)
    LATHE_CUDA_CHECK(kOp, cudaMemsetAsync(args.dtable.data, 0, args.dtable.numel() * sizeof(float), stream));
  if (tokens == 0 || dim == 0) return;
  LATHE_CHECK(tokens <= INT32_MAX, kOp, ": ", tokens, " tokens exceed the sort's 32-bit token index");
  Tensor keys = cuda::device_empty({2, tokens}, DType::i32, "embedding_backward sort keys");
  Tensor token_index = cuda::device_empty({2, tokens}, DType::i32, "embedding_backward sort values");
  auto* keys_in = static_cast<uint32_t*>(keys.view().data);
  auto* tokens_in = static_cast<int32_t*>(token_index.view().data);
  sort_inputs<<<static_cast<unsigned>((tokens + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      args.ids.data, keys_in, tokens_in, tokens, args.ids.dtype == DType::i64);
  LATHE_CUDA_CHECK_LAUNCH(kOp);
  size_t scratch_bytes = 0;
  const int bits = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(vocab - 1))));  // key bits
  LATHE_CUDA_CHECK(kOp, cub::DeviceRadixSort::SortPairs(nullptr, scratch_bytes, keys_in, keys_in + tokens, tokens_in,
                                                        tokens_in + tokens, tokens, 0, bits, stream));
  Tensor scratch = cuda::device_empty({static_cast<int64_t>(scratch_bytes) + 1}, DType::u8, "embedding_backward sort");
  LATHE_CUDA_CHECK(kOp, cub::DeviceRadixSort::SortPairs(scratch.view().data, scratch_bytes, keys_in, keys_in + tokens,
                                                        tokens_in, tokens_in + tokens, tokens, 0, bits, stream));
  sum_runs<<<static_cast<unsigned>(tokens), kThreads, 0, stream>>>(
      keys_in + tokens, tokens_in + tokens, args.d_out.data, static_cast<float*>(args.dtable.data), tokens, dim,
      args.scale, args.d_out.dtype == DType::bf16);
  LATHE_CUDA_CHECK_LAUNCH(kOp);
}

}  // namespace

Impl<EmbeddingArgs, EmbeddingCpuConfig> embedding_cuda_impl() {
  return default_config_cuda_impl<EmbeddingArgs, EmbeddingCpuConfig>(run_forward);
}
Impl<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig> embedding_backward_cuda_impl() {
  return default_config_cuda_impl<EmbeddingBackwardArgs, EmbeddingBackwardCpuConfig>(run_backward);
}

}  // namespace lathe
