// Keys and values of the tokens decoded so far, per layer, so each new token attends to them
// without recomputing the prefix.
#pragma once

#include <vector>

#include "lathe/core/tensor.h"

namespace lathe {

struct KvCache {
  std::vector<Tensor> keys;    // per layer: (1, max_seq, n_kv_heads, head_dim) f32, after RoPE
  std::vector<Tensor> values;  // per layer: (1, max_seq, n_kv_heads, head_dim) f32
  int64_t length = 0;          // tokens stored (the same for every layer)
  int64_t capacity() const { return keys.empty() ? 0 : keys[0].dim(1); }

  KvCache(int64_t layers, int64_t max_seq, int64_t kv_heads, int64_t head_dim);
};

}  // namespace lathe
