// embedding's CUDA kernels and the host steps that launch them, shared by the GPU
// (embedding_cuda.cu) and the host emulation (embedding_cuda_emulated.cc); see
// device/cuda_launcher.cuh and embedding_cuda.h. Besides launch, fill_zero and scratch, the
// backward's launcher sorts: launcher.sort_pairs(op, keys_in, keys_out, values_in, values_out,
// count, bits), a stable sort of (key, value) pairs by the keys' low `bits` bits (CUB's radix
// sort on the GPU, std::stable_sort on the host).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "lathe/core/error.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/embedding/embedding.h"

namespace lathe::embedding_cuda {

constexpr int kThreads = 256;

// Block t: out's row t = table's row ids[t] * scale.
struct Forward {
  __device__ void operator()(unsigned char*, const void* table, const void* ids, void* out, int64_t dim, float scale,
                             bool ids_i64, bool bf16) const {
    const int64_t t = blockIdx.x, row = cuda::load_index(ids, t, ids_i64);
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x)
      cuda::store_f32(out, t * dim + d, cuda::load_f32(table, row * dim + d, bf16) * scale, bf16);
  }
};

// keys[t] = ids[t] (validated to lie in [0, vocab), so they fit 32 bits), tokens[t] = t.
struct SortInputs {
  __device__ void operator()(unsigned char*, const void* ids, uint32_t* keys, int32_t* tokens, int64_t count,
                             bool ids_i64) const {
    const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
    if (t >= count) return;
    keys[t] = static_cast<uint32_t>(cuda::load_index(ids, t, ids_i64));
    tokens[t] = static_cast<int32_t>(t);
  }
};

// Block p starts a run when sorted_keys[p] differs from its predecessor; it sums the run's d_out
// rows in token order (the sort is stable) into dtable[key].
struct SumRuns {
  __device__ void operator()(unsigned char*, const uint32_t* sorted_keys, const int32_t* sorted_tokens,
                             const void* d_out, float* dtable, int64_t count, int64_t dim, float scale,
                             bool bf16) const {
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
};

template <class Launcher>
void run_forward(const EmbeddingArgs& args, Launcher& launcher) {
  const int64_t tokens = args.ids.dim(0);
  if (tokens == 0) return;
  launcher.launch("embedding (cuda)", dim3(static_cast<unsigned>(tokens)), kThreads, 0, Forward{},
                  static_cast<const void*>(args.table.data), static_cast<const void*>(args.ids.data), args.out.data,
                  args.table.dim(1), args.scale, args.ids.dtype == DType::i64, args.table.dtype == DType::bf16);
}

template <class Launcher>
void run_backward(const EmbeddingBackwardArgs& args, Launcher& launcher) {
  constexpr const char* kOp = "embedding_backward (cuda)";
  const int64_t tokens = args.ids.dim(0), vocab = args.dtable.dim(0), dim = args.dtable.dim(1);
  if (args.dtable.numel() > 0) launcher.fill_zero(kOp, args.dtable.data, args.dtable.numel() * sizeof(float));
  if (tokens == 0 || dim == 0) return;
  LATHE_CHECK(tokens <= INT32_MAX, kOp, ": ", tokens, " tokens exceed the sort's 32-bit token index");
  Tensor keys = launcher.scratch({2, tokens}, DType::i32, "embedding_backward sort keys");
  Tensor token_index = launcher.scratch({2, tokens}, DType::i32, "embedding_backward sort values");
  auto* keys_in = static_cast<uint32_t*>(keys.view().data);
  auto* tokens_in = static_cast<int32_t*>(token_index.view().data);
  launcher.launch(kOp, dim3(static_cast<unsigned>((tokens + kThreads - 1) / kThreads)), kThreads, 0, SortInputs{},
                  static_cast<const void*>(args.ids.data), keys_in, tokens_in, tokens, args.ids.dtype == DType::i64);
  const int bits = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(vocab - 1))));  // key bits
  launcher.sort_pairs(kOp, keys_in, keys_in + tokens, tokens_in, tokens_in + tokens, tokens, bits);
  launcher.launch(kOp, dim3(static_cast<unsigned>(tokens)), kThreads, 0, SumRuns{},
                  static_cast<const uint32_t*>(keys_in + tokens), static_cast<const int32_t*>(tokens_in + tokens),
                  static_cast<const void*>(args.d_out.data), static_cast<float*>(args.dtable.data), tokens, dim,
                  args.scale, args.d_out.dtype == DType::bf16);
}

}  // namespace lathe::embedding_cuda
