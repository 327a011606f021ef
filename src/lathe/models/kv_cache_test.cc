#include "lathe/models/kv_cache.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TEST(KvCache, RecurrentStatesCountOnceAndClearToZero) {
  KvCache cache = KvCache::empty(/*layers=*/2, /*max_seq=*/16);
  EXPECT_EQ(cache.capacity(), 16);
  EXPECT_EQ(cache.bytes_per_token(), 0);
  EXPECT_TRUE(cache.rewindable());
  cache.recurrent_states = {Tensor::zeros({1, 2, 3, 4}, DType::f32), Tensor()};
  cache.conv_states = {Tensor(), Tensor::zeros({1, 3, 5}, DType::f32)};
  EXPECT_EQ(cache.recurrent_state_bytes(), (2 * 3 * 4 + 5 * 3) * 4);
  EXPECT_FALSE(cache.rewindable());
  cache.recurrent_states[0].ptr<float>()[7] = 1.5f;
  cache.conv_states[1].ptr<float>()[14] = -2.0f;
  cache.length = 9;
  cache.clear();
  EXPECT_EQ(cache.length, 0);
  EXPECT_EQ(cache.recurrent_states[0].ptr<float>()[7], 0.0f);
  EXPECT_EQ(cache.conv_states[1].ptr<float>()[14], 0.0f);
}

TEST(KvCache, AttentionCacheCapacityIsItsTokenRows) {
  KvCache cache(/*layers=*/3, /*max_seq=*/32, /*kv_heads=*/2, /*head_dim=*/8);
  EXPECT_EQ(cache.capacity(), 32);
  EXPECT_EQ(cache.bytes_per_token(), 3 * 2 * (2 * 8) * 4);
  EXPECT_TRUE(cache.rewindable());
}

}  // namespace
}  // namespace lathe
