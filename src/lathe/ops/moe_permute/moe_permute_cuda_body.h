// The CUDA kernels of moe_permute and moe_permute_backward as LATHE_HOST_DEVICE functions,
// launched by moe_permute_cuda.cu and run on the host by the "cuda_emulated" implementation
// (ops/cuda_emulated_impl.h), so their logic is tested on every machine.
//   The stable counting sort, one block: each thread takes experts e = thread, thread + block, ...;
//   count_expert (phase 1) counts e's slots, the prefix (phase 2, one thread) turns counts into
//   offsets, assign_expert (phase 3) walks the slots in order handing e's slots their rows. Each
//   expert's rows come out in slot order, as on the CPU: the same bits. Correctness first: every
//   expert's thread reads every id (experts x slots reads, all hits in L1 after the first).
//   The row copies and the backward's sums: one thread per output element.
#pragma once

#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/ops/moe_permute/moe_permute.h"

namespace lathe::moe_permute_cuda {

LATHE_HOST_DEVICE inline void count_expert(const int32_t* ids, int64_t slots, int64_t e, int64_t* offsets) {
  int64_t count = 0;
  for (int64_t s = 0; s < slots; ++s) count += ids[s] == e ? 1 : 0;
  offsets[e + 1] = count;
}

// offsets[0] = 0 and offsets[e + 1] += offsets[e]: counts into offsets.
LATHE_HOST_DEVICE inline void counts_to_offsets(int64_t* offsets, int64_t n_experts) {
  offsets[0] = 0;
  for (int64_t e = 0; e < n_experts; ++e) offsets[e + 1] += offsets[e];
}

LATHE_HOST_DEVICE inline void assign_expert(const int32_t* ids, int64_t slots, int64_t e, const int64_t* offsets,
                                            int32_t* source, int32_t* destination) {
  int64_t next = offsets[e];
  for (int64_t s = 0; s < slots; ++s)
    if (ids[s] == e) {
      destination[s] = static_cast<int32_t>(next);
      source[next] = static_cast<int32_t>(s);
      ++next;
    }
}

// Element i of permuted (row i / d): x's row source[row] / top_k. Word: uint32_t (f32) or uint16_t (bf16 bits).
template <class Word>
LATHE_HOST_DEVICE inline void copy_element(const Word* x, const int32_t* source, int64_t top_k, int64_t d, int64_t i,
                                           Word* permuted) {
  const int64_t row = i / d, column = i - row * d;
  permuted[i] = x[(source[row] / top_k) * d + column];
}

// Element i of dx (token i / d): (dx if accumulating, else 0) + the token's top_k rows of d_permuted, k ascending.
LATHE_HOST_DEVICE inline void sum_element(const float* d_permuted, const int32_t* destination, int64_t top_k, int64_t d,
                                          bool accumulate, int64_t i, float* dx) {
  const int64_t t = i / d, column = i - t * d;
  float sum = accumulate ? dx[i] : 0.0f;
  for (int64_t k = 0; k < top_k; ++k) sum += d_permuted[destination[t * top_k + k] * d + column];
  dx[i] = sum;
}

}  // namespace lathe::moe_permute_cuda
