// The CUDA kernels of mla_decode as LATHE_HOST_DEVICE functions, launched by mla_decode_cuda.cu and
// run on the host by the "cuda_emulated" implementation (mla_decode.cc). The reference's algorithm
// with the key range split into parts, as the CPU kernels split it, so that a decode step (one query
// row per head) still fills the GPU:
//   attend_part  one thread per (query row r, part s): the visible cache rows of part s in one pass
//                with an online softmax (running max m and sum l, the kv_rank accumulator rescaled by
//                exp(m_old - m) when m grows). One part: o = acc / l and lse = m + log l directly;
//                several: (m, l, acc) into the workspace.
//   merge_row    one thread per query row: its parts in part order, each weighted by exp(m_s - m).
// The accumulator lives in the caller's array (the thread's own on the GPU). The part count
// depends only on the shape, so results are the same on every run. No tensor cores: the first,
// simple GPU path.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/half.h"
#include "lathe/core/host_device.h"
#include "lathe/ops/mla_decode/mla_decode.h"

namespace lathe::mla_decode_cuda {
namespace {  // internal linkage: each includer (the .cu and mla_decode.cc) has its own copy

// The accumulator a thread holds is kMlaDecodeCudaMaxKvRank floats (mla_decode.h): 2 KiB of local
// memory a thread, which the driver reserves for every thread an SM can hold (about 0.5 GB on an H200).
constexpr int64_t kKeysPerPart = 64;          // cache rows a part walks at least
constexpr int64_t kMaxParts = 256;            // parts of one row's key range at most
constexpr int64_t kMaxPartThreads = 1 << 16;  // (row, part) threads at most: bounds the workspace

inline bool supported(const MlaDecodeArgs& args) { return args.o.dim(3) <= kMlaDecodeCudaMaxKvRank; }

struct Params {
  const void* q;      // (batch, seq_q, heads, width), f32 or bf16
  const void* cache;  // (batch, seq_k, width), rows packed, batch stride cache_batch_stride
  void* o;            // (batch, seq_q, heads, kv_rank), q's dtype
  float* lse;         // (batch, heads, seq_q)
  float* workspace;   // parts > 1: (rows, parts, kv_rank + 2) = acc, then m and l; else unused
  bool is_bf16;
  bool causal;
  float scale;
  int64_t batch, seq_q, heads, width, seq_k, kv_rank, cache_batch_stride;
  int64_t parts, keys_per_part;

  LATHE_HOST_DEVICE int64_t rows() const { return batch * seq_q * heads; }
  int64_t workspace_floats() const { return parts > 1 ? rows() * parts * (kv_rank + 2) : 0; }
};

// Enough parts that each walks at least kKeysPerPart keys, and no more than the thread bound allows.
inline int64_t parts_for(int64_t rows, int64_t seq_k) {
  const int64_t by_keys = (seq_k + kKeysPerPart - 1) / kKeysPerPart;
  const int64_t by_threads = kMaxPartThreads / (rows > 0 ? rows : 1);
  int64_t parts = by_keys < by_threads ? by_keys : by_threads;
  parts = parts > kMaxParts ? kMaxParts : parts;
  return parts < 1 ? 1 : parts;
}

// workspace: workspace_floats() floats (set after params_of where parts > 1).
inline Params params_of(const MlaDecodeArgs& args) {
  Params p;
  p.q = args.q.data;
  p.cache = args.cache.data;
  p.o = args.o.data;
  p.lse = static_cast<float*>(args.lse.data);
  p.workspace = nullptr;
  p.is_bf16 = args.q.dtype == DType::bf16;
  p.causal = args.options.causal;
  p.scale = args.options.scale;
  p.batch = args.q.dim(0), p.seq_q = args.q.dim(1), p.heads = args.q.dim(2), p.width = args.q.dim(3);
  p.seq_k = args.cache.dim(1), p.kv_rank = args.o.dim(3);
  p.cache_batch_stride = args.cache.stride(0);
  p.parts = parts_for(p.rows(), p.seq_k);
  p.keys_per_part = (p.seq_k + p.parts - 1) / p.parts;
  return p;
}

LATHE_HOST_DEVICE inline float load(const void* base, int64_t index, bool is_bf16) {
  return is_bf16 ? bf16_to_float(static_cast<const bf16*>(base)[index]) : static_cast<const float*>(base)[index];
}

// q row . cache row over the width as four chains (element d into chain d % 4, so the sum is not one
// long dependent sequence), added pairwise. Four named registers: an array indexed by d % 4 would
// live in local memory on the GPU.
LATHE_HOST_DEVICE inline float row_dot(const Params& p, int64_t q_row, int64_t cache_row) {
  auto term = [&](int64_t d, float acc) {
    return fmaf(load(p.q, q_row + d, p.is_bf16), load(p.cache, cache_row + d, p.is_bf16), acc);
  };
  float dot0 = 0.0f, dot1 = 0.0f, dot2 = 0.0f, dot3 = 0.0f;
  int64_t d = 0;
  for (; d + 4 <= p.width; d += 4) {
    dot0 = term(d, dot0), dot1 = term(d + 1, dot1), dot2 = term(d + 2, dot2), dot3 = term(d + 3, dot3);
  }
  if (d < p.width) dot0 = term(d, dot0);
  if (d + 1 < p.width) dot1 = term(d + 1, dot1);
  if (d + 2 < p.width) dot2 = term(d + 2, dot2);
  return (dot0 + dot1) + (dot2 + dot3);
}

// Query row r = (b * seq_q + i) * heads + h (q's and o's row order) writes o and lse.
LATHE_HOST_DEVICE void store_row(const Params& p, int64_t r, const float* acc, float max_score, float sum) {
  const int64_t h = r % p.heads, i = (r / p.heads) % p.seq_q, b = r / (p.heads * p.seq_q);
  const bool seen = sum > 0.0f;  // a visible key contributes exp(0) = 1 at its row's maximum
  const float inverse = seen ? 1.0f / sum : 0.0f;
  for (int64_t d = 0; d < p.kv_rank; ++d) {
    const float value = acc[d] * inverse;
    if (p.is_bf16)
      static_cast<bf16*>(p.o)[r * p.kv_rank + d] = float_to_bf16(value);
    else
      static_cast<float*>(p.o)[r * p.kv_rank + d] = value;
  }
  p.lse[(b * p.heads + h) * p.seq_q + i] = seen ? max_score + logf(sum) : -INFINITY;
}

// Thread index = r * parts + s: part s of row r's visible keys; acc holds kv_rank floats.
LATHE_HOST_DEVICE void attend_part(const Params& p, int64_t index, float* acc) {
  const int64_t r = index / p.parts, s = index % p.parts;
  const int64_t i = (r / p.heads) % p.seq_q, b = r / (p.heads * p.seq_q);
  int64_t end = p.causal ? i + p.seq_k - p.seq_q + 1 : p.seq_k;  // bottom-right aligned
  end = end < 0 ? 0 : (end > p.seq_k ? p.seq_k : end);
  const int64_t begin = s * p.keys_per_part;
  if (end > begin + p.keys_per_part) end = begin + p.keys_per_part;
  for (int64_t d = 0; d < p.kv_rank; ++d) acc[d] = 0.0f;
  float max_score = -INFINITY, sum = 0.0f;
  const int64_t q_row = r * p.width;
  for (int64_t j = begin; j < end; ++j) {
    const int64_t cache_row = b * p.cache_batch_stride + j * p.width;
    const float score = row_dot(p, q_row, cache_row) * p.scale;
    if (score > max_score) {  // rescale what is summed so far to the new maximum
      const float correction = expf(max_score - score);
      sum *= correction;
      for (int64_t d = 0; d < p.kv_rank; ++d) acc[d] *= correction;
      max_score = score;
    }
    const float weight = expf(score - max_score);
    sum += weight;
    for (int64_t d = 0; d < p.kv_rank; ++d) acc[d] = fmaf(weight, load(p.cache, cache_row + d, p.is_bf16), acc[d]);
  }
  if (p.parts == 1) return store_row(p, r, acc, max_score, sum);
  float* slot = p.workspace + index * (p.kv_rank + 2);
  for (int64_t d = 0; d < p.kv_rank; ++d) slot[d] = acc[d];
  slot[p.kv_rank] = max_score;
  slot[p.kv_rank + 1] = sum;
}

// Row r's parts (parts > 1), in part order; acc holds kv_rank floats.
LATHE_HOST_DEVICE void merge_row(const Params& p, int64_t r, float* acc) {
  const int64_t stride = p.kv_rank + 2;
  const float* slots = p.workspace + r * p.parts * stride;
  float max_score = -INFINITY;
  for (int64_t s = 0; s < p.parts; ++s)
    if (slots[s * stride + p.kv_rank + 1] > 0.0f && slots[s * stride + p.kv_rank] > max_score)
      max_score = slots[s * stride + p.kv_rank];
  for (int64_t d = 0; d < p.kv_rank; ++d) acc[d] = 0.0f;
  float sum = 0.0f;
  for (int64_t s = 0; s < p.parts; ++s) {
    const float* slot = slots + s * stride;
    if (!(slot[p.kv_rank + 1] > 0.0f)) continue;  // a part with no visible key
    const float weight = expf(slot[p.kv_rank] - max_score);
    sum = fmaf(weight, slot[p.kv_rank + 1], sum);
    for (int64_t d = 0; d < p.kv_rank; ++d) acc[d] = fmaf(weight, slot[d], acc[d]);
  }
  store_row(p, r, acc, max_score, sum);
}

}  // namespace
}  // namespace lathe::mla_decode_cuda
