// MoE permute CPU kernels, compiled once per ISA (scalar, avx2, avx512) via lathe_add_isa_kernels.
// Forward: (1) the stable counting sort on one thread (tokens * top_k slots, a few microseconds:
// its first pass also re-checks every expert id, so a bad id never indexes out of bounds even
// when this kernel is called without validate), (2) the row copies, split over permuted rows:
// each thread writes a contiguous block of permuted, reading x's rows where source points. Rows
// are copied as raw 32-bit words through VecF (bf16 rows bit for bit, no conversion), with
// optional non-temporal stores.
// Backward: split over tokens; each dx row sums its top_k gathered rows in ascending k in
// registers, one pass over the columns (optionally with non-temporal stores).
// Every output element has one writer and a fixed order of operations: bitwise identical for any
// thread count and config.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/moe_permute/moe_permute.h"

namespace lathe::LATHE_ISA_NS {
namespace {

using simd::load_row;
using simd::store_row;
using simd::VecF;
constexpr int W = VecF::width;

// Copies `bytes` bytes as 32-bit words through vector registers (moves never alter bits), then
// the last 0-3 bytes. Rows that do not start on a 4-byte boundary (bf16 rows of odd width) are
// copied with memcpy instead: a float access there would be misaligned.
void copy_row(char* destination, const char* source, int64_t bytes, bool streaming) {
  if ((reinterpret_cast<uintptr_t>(destination) | reinterpret_cast<uintptr_t>(source)) % alignof(float) != 0) {
    std::memcpy(destination, source, static_cast<size_t>(bytes));
    return;
  }
  const int64_t words = bytes / 4;
  float* out = reinterpret_cast<float*>(destination);
  const float* in = reinterpret_cast<const float*>(source);
  int64_t i = 0;
  if (streaming) {
    for (; i + W <= words; i += W) simd::store_row_streaming(out + i, VecF::load(in + i), W);
  } else {
    for (; i + 2 * W <= words; i += 2 * W) {
      VecF::load(in + i).store(out + i);
      VecF::load(in + i + W).store(out + i + W);
    }
  }
  for (; i < words; i += W) store_row(out + i, load_row(in + i, words - i), words - i);
  if (bytes % 4) std::memcpy(destination + words * 4, source + words * 4, bytes % 4);
}

// Returns false, having written nothing but group_offsets, when an expert id is out of range.
bool sort_slots(const MoePermuteArgs& args) {
  const int64_t slots = args.expert_ids.numel(), n_experts = args.n_experts;
  const int32_t* ids = static_cast<const int32_t*>(args.expert_ids.data);
  int64_t* offsets = static_cast<int64_t*>(args.group_offsets.data);
  int32_t* source = static_cast<int32_t*>(args.source.data);
  int32_t* destination = static_cast<int32_t*>(args.destination.data);
  std::memset(offsets, 0, sizeof(int64_t) * (n_experts + 1));
  for (int64_t s = 0; s < slots; ++s) {
    if (ids[s] < 0 || ids[s] >= n_experts) return false;
    ++offsets[ids[s] + 1];
  }
  for (int64_t e = 0; e < n_experts; ++e) offsets[e + 1] += offsets[e];
  AlignedBuffer cursor_buffer(sizeof(int64_t) * static_cast<size_t>(n_experts));
  int64_t* next = cursor_buffer.as<int64_t>();
  std::memcpy(next, offsets, sizeof(int64_t) * n_experts);
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t row = next[ids[s]]++;
    destination[s] = static_cast<int32_t>(row);
    source[row] = static_cast<int32_t>(s);
  }
  return true;
}

void permute(const MoePermuteArgs& args, const MoePermuteCpuConfig& config) {
  if (!sort_slots(args)) return;
  const int64_t slots = args.expert_ids.numel(), top_k = args.expert_ids.dim(1);
  const int64_t row_bytes = args.x.dim(1) * static_cast<int64_t>(dtype_size(args.x.dtype));
  if (slots == 0 || row_bytes == 0) return;
  const char* x = static_cast<const char*>(args.x.data);
  char* permuted = static_cast<char*>(args.permuted.data);
  const int32_t* source = static_cast<const int32_t*>(args.source.data);
  const bool streaming = config.streaming != 0;
  parallel_for(slots, std::max<int64_t>(config.rows_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      copy_row(permuted + r * row_bytes, x + (source[r] / top_k) * row_bytes, row_bytes, streaming);
    if (streaming) simd::streaming_fence();
  });
}

void permute_backward(const MoePermuteBackwardArgs& args, const MoePermuteBackwardCpuConfig& config) {
  const int64_t tokens = args.dx.dim(0), d = args.dx.dim(1), top_k = args.top_k;
  if (tokens == 0 || d == 0) return;
  const float* d_permuted = static_cast<const float*>(args.d_permuted.data);
  const int32_t* destination = static_cast<const int32_t*>(args.destination.data);
  float* dx = static_cast<float*>(args.dx.data);
  const bool accumulate = args.accumulate, streaming = config.streaming != 0;
  parallel_for(tokens, std::max<int64_t>(config.tokens_per_task, 1), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* out = dx + t * d;
      const int32_t* rows = destination + t * top_k;
      for (int64_t j = 0; j < d; j += W) {
        const int64_t n = d - j;
        VecF sum = accumulate ? load_row(out + j, n) : VecF::zero();
        for (int64_t k = 0; k < top_k; ++k) sum += load_row(d_permuted + rows[k] * d + j, n);
        streaming ? simd::store_row_streaming(out + j, sum, n) : store_row(out + j, sum, n);
      }
    }
    if (streaming) simd::streaming_fence();
  });
}

}  // namespace

void moe_permute_kernel(const MoePermuteArgs& args, const MoePermuteCpuConfig& config) { permute(args, config); }

void moe_permute_backward_kernel(const MoePermuteBackwardArgs& args, const MoePermuteBackwardCpuConfig& config) {
  permute_backward(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
