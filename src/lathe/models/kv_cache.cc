#include "lathe/models/kv_cache.h"

namespace lathe {

KvCache::KvCache(int64_t layers, int64_t max_seq, int64_t kv_heads, int64_t head_dim) {
  for (int64_t layer = 0; layer < layers; ++layer) {
    keys.push_back(Tensor::zeros({1, max_seq, kv_heads, head_dim}, DType::f32));
    values.push_back(Tensor::zeros({1, max_seq, kv_heads, head_dim}, DType::f32));
  }
}

}  // namespace lathe
