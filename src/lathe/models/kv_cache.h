// Keys and values of the tokens decoded so far, per layer, so each new token attends to them
// without recomputing the prefix. Standard attention keeps per-head keys and values; multi-head
// latent attention (models/mla_layer.h) keeps one latent row per token in `keys` and no values.
// Recurrent layers (linear attention, state-space scans) keep a fixed-size state instead, which
// does not grow with the context and cannot be rewound: a cache holding any is refilled from the
// start when a new context does not extend the tokens it holds (infer/generator.h).
#pragma once

#include <utility>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe {

struct KvCache {
  std::vector<Tensor> keys;    // per layer: (1, max_seq, n_kv_heads, head_dim) f32, after RoPE;
                               // latent: (1, max_seq, 1, kv_lora_rank + qk_rope_head_dim)
  std::vector<Tensor> values;  // per layer: (1, max_seq, n_kv_heads, head_dim) f32; latent: none
  // Recurrent layers: per layer, the state carried from one token to the next (f32), or an empty
  // tensor for a layer without one. The families that have them size the vectors to n_layers.
  std::vector<Tensor> conv_states;       // (1, conv_kernel - 1, channels): a causal short convolution's last inputs
  std::vector<Tensor> recurrent_states;  // (1, heads, key_dim, value_dim) gated delta rule; (1, heads, head_dim,
                                         // state_size) Mamba-2's scan
  int64_t length = 0;                    // tokens stored (the same for every layer)
  int64_t max_tokens = 0;                // tokens it can hold (model.max_seq_len)
  int64_t capacity() const { return max_tokens; }
  // Bytes one token adds over all layers (what a longer context costs).
  int64_t bytes_per_token() const;
  // Bytes of recurrent state over all layers: the same at every context length.
  int64_t recurrent_state_bytes() const;
  // False when the cache holds recurrent state: it cannot go back to an earlier length.
  bool rewindable() const { return recurrent_state_bytes() == 0; }
  // Empties the cache: length 0 and every recurrent state zero.
  void clear();
  // Moves every tensor to `device` (GPU generation: the model's weights are there), once, while
  // the cache is empty. The layers write it with device copies (append_tokens, their states).
  void move_to(Device device);

  KvCache(int64_t layers, int64_t max_seq, int64_t kv_heads, int64_t head_dim);
  // One row of `width` floats per token and layer, no values (multi-head latent attention).
  static KvCache latent(int64_t layers, int64_t max_seq, int64_t width);
  // Per layer (kv_heads, head_dim); a layer with 0 heads keeps nothing (it reuses another layer's
  // keys and values: KV sharing) and its tensors have no tokens.
  static KvCache per_layer(const std::vector<std::pair<int64_t, int64_t>>& heads_and_dims, int64_t max_seq);
  // No keys or values in any layer (a model of recurrent layers only, e.g. Mamba-2): the family
  // adds its states.
  static KvCache empty(int64_t layers, int64_t max_seq);

 private:
  KvCache() = default;
};

// Copies `rows` (1, seq, ...) f32 into `buffer` (1, capacity, ...) at token `offset` and returns
// the buffer's tokens [0, offset + seq) as a view sharing its storage; both on the host or both on
// the GPU. lathe::Error "generation: N
// tokens exceed the KV cache capacity of C (model.max_seq_len)" when they do not fit.
Tensor append_tokens(Tensor& buffer, int64_t offset, const Tensor& rows);
// Overwrites a recurrent layer's cached state with the state a forward pass ended in (same element
// count, f32), on the host or the GPU.
void store_state(const Tensor& final_state, Tensor& cached);

}  // namespace lathe
