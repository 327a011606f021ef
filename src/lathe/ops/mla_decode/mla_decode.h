// Multi-head latent attention (DeepSeek-V2/V3) in its weight-absorbed form: every head attends
// directly over the cached latent rows, one row per token shared by all heads (not per head).
//   cache[j]   = [c_kv[j] (kv_rank) | k_rope[j] (rope_dim)]            normalised latent + RoPE'd key
//   q[i, h]    = [q_nope[i, h] W_UK_h (kv_rank) | q_rope[i, h] (rope_dim)] W_UK absorbed into the query
//   s[i, h, j] = scale * q[i, h] . cache[j]
//   p[i, h, j] = exp(s[i, h, j] - lse[i, h]) over visible j,  lse[i, h] = log sum_visible exp(s[i, h, j])
//   o[i, h]    = sum_j p[i, h, j] c_kv[j]                              latent output, kv_rank wide
// The caller applies W_UV_h to o (o_h W_UV_h^T) afterwards; with W_UK and W_UV absorbed this equals
// the unabsorbed attention over [k_nope_h = c_kv W_UK_h^T | k_rope] and v_h = c_kv W_UV_h^T.
// kv_rank is o's last axis; rope_dim = q's last axis - kv_rank.
// Visibility: with causal, query i sees keys j <= i + (seq_k - seq_q) (bottom-right aligned, as
// flash_attention); a query with no visible key gets o = 0 and lse = -inf.
// scale is explicit (DeepSeek: 1 / sqrt(qk_nope + qk_rope) times the YaRN mscale^2) and must be > 0.
// Forward only (inference: decode and prefill over the latent KV cache). On a GPU: a thread per
// query row and key part (mla_decode_cuda.h; kv_rank <= 512), checked here as "cuda_emulated".
// q, cache, o: all f32 or all bf16 (math in f32); lse f32. q, o, lse contiguous; cache rows packed
// (last two axes contiguous) with any batch stride, so a slice [0, length) of a larger
// (batch, capacity, width) cache buffer is accepted as is. The fast path treats the seq_q x n_heads
// query rows of a batch as one tile set against the shared cache rows (the cache is read once per
// query-row block, not once per head); key blocks are split into a configured number of parts
// merged in a fixed order, so results are bitwise reproducible for any thread count.
// Errors: lathe::Error naming the argument for wrong ranks, shapes, dtypes, strides, kv_rank larger
// than the row width, or a scale that is not > 0.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

// The widest kv_rank the CUDA implementation takes (its accumulator, a thread's own array):
// DeepSeek-V2/V3's kv_lora_rank. The CPU implementations take any.
inline constexpr int64_t kMlaDecodeCudaMaxKvRank = 512;

struct MlaDecodeOptions {
  float scale = 0.0f;   // softmax scale; required > 0
  bool causal = false;  // bottom-right aligned causal mask
};

struct MlaDecodeArgs {
  TensorView q;      // (batch, seq_q, n_heads, kv_rank + rope_dim)  absorbed query
  TensorView cache;  // (batch, seq_k, kv_rank + rope_dim)           latent KV cache rows (rows packed)
  TensorView o;      // (batch, seq_q, n_heads, kv_rank)              output, latent space
  TensorView lse;    // (batch, n_heads, seq_q) f32                   output
  MlaDecodeOptions options;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(q), visit(cache), visit(o), visit(lse);
  }
};

struct MlaDecodeCpuConfig {
  int64_t block_q = 64;    // query rows (seq_q x n_heads flattened) per tile
  int64_t block_k = 64;    // cache rows per score tile
  int64_t key_splits = 1;  // parts of the key range attended independently, then merged in order
  template <class Visit>
  void visit(Visit&& field) {
    field("block_q", block_q);
    field("block_k", block_k);
    field("key_splits", key_splits);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void mla_decode(const MlaDecodeArgs& args, const Dispatch& dispatch = {});

// Throws lathe::Error naming the argument, expected and actual shape, dtype or stride.
void validate(const MlaDecodeArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline); one score row at a time.
template <class T>
void mla_decode_reference(const MlaDecodeArgs& args);

OpCost mla_decode_cost(const MlaDecodeArgs& args);

const Op<MlaDecodeArgs, MlaDecodeCpuConfig>& mla_decode_op();

}  // namespace lathe
