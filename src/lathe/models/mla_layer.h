// Multi-head latent attention (MLA, DeepSeek-V2/V3; transformers' DeepseekV3Attention), built
// only from autograd ops. With H heads, dn = qk_nope_head_dim, dr = qk_rope_head_dim,
// dv = v_head_dim, r = kv_lora_rank and x (tokens, d_model) already normalised:
//   q        = q_b(norm(q_a(x)))  or  q_proj(x)          (tokens, H, dn + dr)    q_lora_rank > 0 or 0
//   [c, kr]  = kv_a_proj_with_mqa(x)                      (tokens, r + dr): the latent and ONE rope key
//   c        = norm(c)                                    kv_a_layernorm
//   [kn, v]  = kv_b(c)                                    (tokens, H, dn + dv)
//   q[.., dn:] = rope(q[.., dn:]),  kr = rope(kr)         (interleaved or rotate-half, YaRN or not)
//   k        = [kn | kr for every head]                   (tokens, H, dn + dr)
//   o        = causal attention(q, k, v, scale)           (tokens, H, dv): values narrower than keys
//   out      = o_proj(o)                                  (tokens, d_model)
// scale = (dn + dr)^-0.5, times mscale(factor, rope_yarn_mscale_all_dim)^2 under YaRN (as
// transformers' yarn_apply_mscale). The latent norms use eps 1e-6 (transformers builds them
// without the config's rms_norm_eps).
//
// Inference keeps only [c | kr] per token (KvCache::latent, r + dr floats instead of
// H * (dn + dr + dv)), and attends over it with the weight-absorbed form: per head the query's
// nope part is moved into latent space (q_nope_h W_UK_h), scores are taken against the cached
// rows directly, and the latent output is moved back (W_UV_h) before o_proj; W_UK_h and W_UV_h are
// head h's rows of kv_b. The same on a GPU: the mla_decode op has a CUDA kernel, the per-head
// products are cuBLASLt's, the query's rope part a device copy.
#pragma once

#include "lathe/models/family_spec.h"

namespace lathe {

// The weights mla_attention reads; absent ones point to a null Var.
struct MlaWeights {
  const autograd::Var* q_proj;     // (H * (dn + dr), d_model)    q_lora_rank == 0
  const autograd::Var* q_a_proj;   // (q_lora_rank, d_model)       q_lora_rank > 0
  const autograd::Var* q_a_norm;   // (q_lora_rank)
  const autograd::Var* q_b_proj;   // (H * (dn + dr), q_lora_rank)
  const autograd::Var* kv_a_proj;  // (r + dr, d_model)            kv_a_proj_with_mqa
  const autograd::Var* kv_a_norm;  // (r)
  const autograd::Var* kv_b_proj;  // (H * (dn + dv), r)
  const autograd::Var* o_proj;     // (d_model, H * dv)
};

// The softmax scale described above.
float mla_softmax_scale(const ModelConfig& config);

// x: (batch * seq, d_model) -> (batch * seq, d_model). With context.cache set (inference), the
// tokens' latent rows are appended to the cache and attention runs in the absorbed form.
autograd::Var mla_attention(autograd::Tape& tape, const BlockContext& context, const MlaWeights& weights,
                            const autograd::Var& x);

// What the attention part keeps per token for the backward (models/memory_estimate.h).
LayerActivationCounts mla_activation_counts(const ModelConfig& config);
// Causal attention FLOPs per token, forward + backward: 3 * 2 * H * (dn + dr + dv) / 2 * seq.
double mla_attention_training_flops_per_token(const ModelConfig& config, int64_t seq_len);
// n_layers latent caches of (1, max_seq, 1, kv_lora_rank + qk_rope_head_dim).
KvCache make_mla_kv_cache(const ModelConfig& config, int64_t max_seq);

}  // namespace lathe
