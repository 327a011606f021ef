// Fused LM head + cross-entropy, forward and backward in one call (as training uses it):
//   raw[t, v]    = logit_scale * dot(hidden[t], weight[v])
//   logits[t, v] = softcap > 0 ? softcap * tanh(raw / softcap) : raw          (Gemma 2 final softcap)
//   lse[t]       = log(sum_v exp(logits[t, v]))
//   loss         = (1 / n) * sum_{t valid} (lse[t] - logits[t, target[t]])
//                  + z_loss * (1 / n) * sum_{t valid} lse[t]^2                  (PaLM z-loss)
// where a token is valid when target[t] != ignore_index and n counts the valid tokens. With no
// valid token, loss = 0 and both gradients are 0.
//   dhidden = grad_scale * d loss / d hidden,  dweight = grad_scale * d loss / d weight
// (dweight is overwritten, not accumulated; grad_scale does not scale loss).
// dlogits_dtype (the precision of d loss / d raw as it enters the two gradient products):
//   f32 (default): the gradients as accurate as f32 products allow; bf16 inputs reach it by
//     splitting dlogits into three bf16 terms (AMX) or by products on f32 copies (vector paths);
//   bf16 (bf16 inputs only): dlogits rounded to bf16 once, then two bf16 products, as bf16
//     autocast does (and as bf16 training rounds every other linear layer's gradient): a third of
//     the tile products' work of the three terms, half the f32 products' time on vdpbf16ps. The
//     float64 reference stays exact; the naive float baseline of the tolerance rule rounds
//     dlogits the same way (the FlashAttention rule: error at most 2x a naive implementation in
//     the precision the op computes in).
// Shapes: hidden (tokens, d_model) f32|bf16; weight (vocab, d_model) same dtype; targets (tokens)
// i32|i64 in [0, vocab) or ignore_index; loss (1) f32; dhidden (tokens, d_model) f32; dweight
// (vocab, d_model) f32; lse (tokens) f32 optional (computed for ignored tokens too).
// The tokens x vocab logits are never materialised: token chunks x vocab chunks of at most
// token_chunk x vocab_chunk floats are computed (pass 1: online logsumexp), then recomputed
// (pass 2: dlogits, then dhidden and dweight GEMMs through the matmul op).
// Errors (lathe::Error): shapes, dtypes, strides, vocab or d_model of 0, a target outside
// [0, vocab) that is not ignore_index (naming the token index), softcap < 0, dlogits_dtype bf16
// with f32 inputs.
// Results are bitwise reproducible for a fixed thread count.
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct LinearCrossEntropyArgs {
  TensorView hidden;   // (tokens, d_model) f32 or bf16
  TensorView weight;   // (vocab, d_model) same dtype as hidden: the LM head, one row per token id
  TensorView targets;  // (tokens) i32 or i64
  TensorView loss;     // (1) f32 output
  TensorView dhidden;  // (tokens, d_model) f32 output
  TensorView dweight;  // (vocab, d_model) f32 output, overwritten
  TensorView lse;      // (tokens) f32 output, logsumexp of each token's final logits; data may be null
  int64_t ignore_index = -100;
  float logit_scale = 1.0f;
  float softcap = 0.0f;              // 0: off
  float z_loss = 0.0f;               // coefficient of mean(lse^2)
  float grad_scale = 1.0f;           // multiplies both gradients (gradient accumulation)
  DType dlogits_dtype = DType::f32;  // f32 or bf16 (bf16 inputs only): see above
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(hidden), visit(weight), visit(targets), visit(loss), visit(dhidden), visit(dweight), visit(lse);
  }
};

struct LinearCrossEntropyCpuConfig {
  int64_t token_chunk = 256;   // tokens per chunk (rows of the logits tile)
  int64_t vocab_chunk = 1024;  // vocabulary entries per tile (columns of the logits tile)
  template <class Visit>
  void visit(Visit&& field) {
    field("token_chunk", token_chunk);
    field("vocab_chunk", vocab_chunk);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void linear_cross_entropy(const LinearCrossEntropyArgs& args, const Dispatch& dispatch = {});

// Throws lathe::Error naming the argument, expected and actual shape or dtype, or the token
// index of an out-of-range target.
void validate(const LinearCrossEntropyArgs& args);

// Plain loops computing in T (double: the oracle; float: the naive baseline) with the full
// logits matrix. Writes loss, dhidden, dweight and lse (when present).
template <class T>
void linear_cross_entropy_reference(const LinearCrossEntropyArgs& args);

// flops: the executed work, 8 * tokens * vocab * d_model (logits twice, two gradient GEMMs), or
// 6 * ... when the heuristic's vocabulary tile spans the whole vocabulary (logits computed once);
// the useful (model) work is 6 * tokens * vocab * d_model (linear_cross_entropy_useful_flops).
OpCost linear_cross_entropy_cost(const LinearCrossEntropyArgs& args);
double linear_cross_entropy_useful_flops(const LinearCrossEntropyArgs& args);

// Extra memory the fused kernel allocates for a config (bytes): the logits tile plus per-token
// row state, and for bf16 inputs f32 copies of the operands' chunks (vector paths) or three bf16
// dlogits tiles (amx), whichever is larger; with bf16 dlogits one bf16 tile (every path).
int64_t linear_cross_entropy_workspace_bytes(const LinearCrossEntropyArgs& args,
                                             const LinearCrossEntropyCpuConfig& config);

const Op<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig>& linear_cross_entropy_op();

}  // namespace lathe
