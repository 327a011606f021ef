// The tiny decoder the model, optimizer and trainer tests build: small enough for float64
// references and finite differences. Tests name only the sizes they need to differ, e.g.
//   ModelConfig config = tiny_model_config({.vocab_size = 31, .n_layers = 1, .n_kv_heads = 2});
// and then set family traits (qk_norm, soft caps, ...) on the result.
#pragma once

#include <cstdint>

#include "lathe/models/model_config.h"

namespace lathe {

struct TinyModelSize {  // fields in ModelConfig's order, so designated initializers read alike
  int64_t vocab_size = 29;
  int64_t d_model = 16;
  int64_t n_layers = 2;
  int64_t n_heads = 2;
  int64_t n_kv_heads = 1;  // grouped-query attention: 2 query heads per KV head
  int64_t head_dim = 0;    // 0: d_model / n_heads
  int64_t ffn_dim = 24;
  int64_t max_seq_len = 8;
};

// A Llama-family ModelConfig of these sizes; every other field keeps ModelConfig's default.
inline ModelConfig tiny_model_config(const TinyModelSize& size = {}) {
  ModelConfig config;
  config.family = "llama";
  config.vocab_size = size.vocab_size;
  config.d_model = size.d_model;
  config.n_layers = size.n_layers;
  config.n_heads = size.n_heads;
  config.n_kv_heads = size.n_kv_heads;
  config.head_dim = size.head_dim;
  config.ffn_dim = size.ffn_dim;
  config.max_seq_len = size.max_seq_len;
  return config;
}

}  // namespace lathe
