// Flash attention (FlashAttention-2 semantics, Hugging Face layout), forward and backward.
//   s[i, j]  = scale * q[i] . k[j]                      (scale = 1/sqrt(head_dim) when 0)
//   s'[i, j] = softcap * tanh(s[i, j] / softcap)        (softcap > 0 only; Gemma 2)
//   p[i, j]  = exp(s'[i, j] - lse[i]) over visible j,   lse[i] = log sum_visible exp(s'[i, j])
//   o[i]     = sum_j p[i, j] v[j]
// q and k share head_dim; v, o and do have their own v_head_dim (MLA: head_dim 192 = 128 nope + 64
// rope, v_head_dim 128), which may be smaller, equal or larger. The default scale uses head_dim.
// Visibility: with causal, query i sees keys j <= i + (seq_k - seq_q) (bottom-right aligned, as
// FlashAttention 2); with window > 0 (requires causal) also j > i + (seq_k - seq_q) - window
// (Mistral / Gemma sliding window). A query with no visible key gets o = 0 and lse = -inf.
// GQA / MQA: query head h reads kv head h / (n_heads / n_kv_heads).
// Backward (FlashAttention-2): D[i] = sum_d do[i] * o[i]; dp = do v^T; ds' = p * (dp - D);
//   ds = ds' * (1 - tanh^2) with softcap; dq = scale * ds k; dk = scale * ds^T q; dv = p^T do,
//   dk/dv summed over the query heads sharing a kv head (overwritten, not accumulated).
// q, k, v, o, do, dq, dk, dv: all f32 or all bf16 (math in f32); lse f32; all contiguous. The fast paths keep only
// block_q x block_k score tiles, never the seq_q x seq_k matrix. Results are bitwise reproducible for a fixed thread
// count. Errors: lathe::Error naming the argument for wrong ranks, shapes, dtypes, non-divisible heads, negative window
// / softcap, or window without causal.
#pragma once

#include "lathe/core/host_device.h"
#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct FlashAttentionOptions {
  float scale = 0.0f;    // 0: 1 / sqrt(head_dim)
  bool causal = false;   // bottom-right aligned causal mask
  int64_t window = 0;    // sliding window length (keys i_aligned - window < j <= i_aligned); 0 = off
  float softcap = 0.0f;  // logit soft cap; 0 = off
};

struct FlashAttentionArgs {
  TensorView q;    // (batch, seq_q, n_heads, head_dim)
  TensorView k;    // (batch, seq_k, n_kv_heads, head_dim)
  TensorView v;    // (batch, seq_k, n_kv_heads, v_head_dim)
  TensorView o;    // (batch, seq_q, n_heads, v_head_dim)  output
  TensorView lse;  // (batch, n_heads, seq_q) f32          output, saved for backward
  FlashAttentionOptions options;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(q), visit(k), visit(v), visit(o), visit(lse);
  }
};

struct FlashAttentionBackwardArgs {
  TensorView q;    // (batch, seq_q, n_heads, head_dim)
  TensorView k;    // (batch, seq_k, n_kv_heads, head_dim)
  TensorView v;    // (batch, seq_k, n_kv_heads, v_head_dim)
  TensorView o;    // (batch, seq_q, n_heads, v_head_dim)    from the forward
  TensorView lse;  // (batch, n_heads, seq_q)                from the forward
  TensorView d_o;  // (batch, seq_q, n_heads, v_head_dim)    gradient of o
  TensorView dq;   // (batch, seq_q, n_heads, head_dim)      output
  TensorView dk;   // (batch, seq_k, n_kv_heads, head_dim)   output
  TensorView dv;   // (batch, seq_k, n_kv_heads, v_head_dim) output
  FlashAttentionOptions options;
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(q), visit(k), visit(v), visit(o), visit(lse), visit(d_o), visit(dq), visit(dk), visit(dv);
  }
};

struct FlashAttentionCpuConfig {
  int64_t block_q = 64;  // queries per tile (rows of the score tile)
  int64_t block_k = 64;  // keys per tile (columns of the score tile)
  template <class Visit>
  void visit(Visit&& field) {
    field("block_q", block_q);
    field("block_k", block_k);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void flash_attention(const FlashAttentionArgs& args, const Dispatch& dispatch = {});
void flash_attention_backward(const FlashAttentionBackwardArgs& args, const Dispatch& dispatch = {});

// Throws lathe::Error naming the argument, expected and actual shape or dtype.
void validate(const FlashAttentionArgs& args);
void validate(const FlashAttentionBackwardArgs& args);

// The scale actually used (options.scale, or 1/sqrt(head_dim) when 0).
float attention_scale(const FlashAttentionOptions& options, int64_t head_dim);
// Keys visible to query i: [*begin, *end) (empty when end <= begin). Host and CUDA kernels share it.
inline LATHE_HOST_DEVICE void visible_keys(bool causal, int64_t window, int64_t i, int64_t seq_q, int64_t seq_k,
                                           int64_t* begin, int64_t* end) {
  const int64_t aligned = i + seq_k - seq_q;
  *end = causal ? (aligned + 1 < seq_k ? aligned + 1 : seq_k) : seq_k;
  const int64_t first = aligned - window + 1;
  *begin = (causal && window > 0 && first > 0) ? first : 0;
}
// The queries that see at least one key of [key_first, key_end): [*first, *end) (empty when end <=
// first). The sets visible_keys gives move forward with i, so these queries are one run; the
// tensor-core backward's dk/dv kernel walks exactly it for a block of keys.
inline LATHE_HOST_DEVICE void queries_seeing_keys(bool causal, int64_t window, int64_t key_first, int64_t key_end,
                                                  int64_t seq_q, int64_t seq_k, int64_t* first, int64_t* end) {
  const int64_t offset = seq_k - seq_q;  // query i is aligned with key i + offset
  // end(i) > key_first, and begin(i) < key_end (a window's first key moves forward with i):
  *first = causal && key_first - offset > 0 ? key_first - offset : 0;
  *end = causal && window > 0 && key_end + window - 1 - offset < seq_q ? key_end + window - 1 - offset : seq_q;
}
inline void visible_keys(const FlashAttentionOptions& options, int64_t i, int64_t seq_q, int64_t seq_k, int64_t* begin,
                         int64_t* end) {
  visible_keys(options.causal, options.window, i, seq_q, seq_k, begin, end);
}

// Plain loops computing in T (double: the oracle; float: the naive baseline, which for bf16 inputs
// rounds P and dS to bf16 before their products); one score row at a time.
template <class T>
void flash_attention_reference(const FlashAttentionArgs& args);
template <class T>
void flash_attention_backward_reference(const FlashAttentionBackwardArgs& args);

OpCost flash_attention_cost(const FlashAttentionArgs& args);
OpCost flash_attention_backward_cost(const FlashAttentionBackwardArgs& args);

const Op<FlashAttentionArgs, FlashAttentionCpuConfig>& flash_attention_op();
const Op<FlashAttentionBackwardArgs, FlashAttentionCpuConfig>& flash_attention_backward_op();

}  // namespace lathe
