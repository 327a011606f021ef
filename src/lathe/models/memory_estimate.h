// Predicted tensor memory of one training step: parameters, gradients, AdamW moments, the
// activations the forward keeps for the backward under a remat policy, and the largest scratch
// the backward holds on top of them. Compared with the measured peak (tensor_bytes_peak) by
// `lathe bench train`.
//
// The saved activations are counted from what the autograd ops keep (autograd/ops.cc): every op's
// output stays alive while its backward closure exists (the closure holds the output Var to read
// its gradient). The per-layer counts are the family's (LayerSpec::activation_counts); for
// the standard decoder layer (models/blocks.h), per layer and token (f32, Q = n_heads * head_dim,
// K = n_kv_heads * head_dim, H = n_heads, f = ffn_dim, d = d_model):
//   save_all         norms 2d + 2 (outputs + inv_rms), q/k/v Q + 2K, RoPE outputs Q + K, attention
//                    output Q + H (log-sum-exp), o_proj d, two residual adds 2d, gate/up/act 3f,
//                    down d; qk_norm adds Q + K + H + n_kv_heads, sandwich norms 2d + 2
//   recompute_layer  the layer's output d (its input is the previous layer's output)
//   save_matmuls     the output d plus the stashed matmul outputs Q + 2K + d + 2f + d
// A mixture-of-experts layer (models/moe_layer.h) keeps instead of the dense MLP's terms, with E
// experts, k = top_k, F = expert width: router logits and probs 2E, combine weights, expert ids
// and destinations 3k, per routed copy the permuted row d, gate_up 2F, activation F and expert
// output d, the combined output d (+ a shared expert's dense terms and gate); the matmul outputs
// are E + k (2F + d). The router losses keep every MoE layer's logits, probs and ids once more
// (2E + k per token, whatever the policy).
// Outside the layers: the embedding output d, the final norm d + 1 and the fused cross-entropy's
// hidden gradient d per token, plus its weight gradient (vocab, d) once per micro-batch.
#pragma once

#include <cstdint>

#include "lathe/autograd/remat.h"
#include "lathe/core/json.h"
#include "lathe/models/model_config.h"

namespace lathe {

struct TrainingMemoryEstimate {
  int64_t parameter_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t optimizer_bytes = 0;   // AdamW's exp_avg and exp_avg_sq
  int64_t activation_bytes = 0;  // kept by the forward for the backward, at the end of the forward
  int64_t transient_bytes = 0;   // the largest scratch on top during backward (one recomputed layer,
                                 // gradients in flight, the embedding's dense table gradient)
  // Of activation_bytes: the routing buffers of the MoE layers (router logits, probs, weights, ids,
  // destinations, the permuted token copies, the router losses' copies); 0 for a dense model.
  int64_t routing_bytes = 0;
  int64_t total_bytes() const {
    return parameter_bytes + gradient_bytes + optimizer_bytes + activation_bytes + transient_bytes;
  }
  Json to_json() const;
};

// Elements (f32: 4 bytes each) layer `layer` keeps per token under the policy, as counted above.
int64_t saved_elements_per_token(const ModelConfig& config, int64_t layer, RematPolicy policy);

// The prediction for a micro-batch of batch x seq tokens in f32. A bf16 run keeps other bytes, not
// modelled here: the bf16 copies its matmuls read (each projection's input, rounded once; attention's
// rounded q, k, v and o where it runs in bf16) in addition to some f32 values, and instead of others
// (the decoder layer's normed inputs and the MLP's hidden activation are written in bf16 only). The
// default config under save_all on Zen 4 measured 1.17x this prediction before those were written in
// bf16 only, 0.94x after: an overestimate, the safe side for memory_check.
TrainingMemoryEstimate estimate_training_memory(const ModelConfig& config, int64_t batch, int64_t seq,
                                                RematPolicy policy);

}  // namespace lathe
