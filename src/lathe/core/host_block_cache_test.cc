#include "lathe/core/host_block_cache.h"

#include <gtest/gtest.h>

#include "lathe/core/tensor.h"

namespace lathe {
namespace {

// Sizes no other test allocates, so blocks cached by earlier tests never match.
constexpr size_t kOneMiB = (size_t{1} << 20) + 64 * 7;
constexpr size_t kTwoMiB = (size_t{2} << 20) + 64 * 7;

class HostBlockCache : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = set_host_block_cache_enabled(true);
    trim_host_block_cache();
  }
  void TearDown() override { set_host_block_cache_enabled(previous_); }
  bool previous_ = true;
};

TEST_F(HostBlockCache, AReleasedBlockIsHandedOutAgainForTheSameSize) {
  void* first = acquire_host_block(kOneMiB);
  ASSERT_NE(first, nullptr);
  const HostBlockCacheStats before = host_block_cache_stats();
  release_host_block(first, kOneMiB);
  EXPECT_EQ(host_block_cache_stats().cached_bytes, before.cached_bytes + static_cast<int64_t>(kOneMiB));
  void* again = acquire_host_block(kOneMiB);
  EXPECT_EQ(again, first);
  const HostBlockCacheStats after = host_block_cache_stats();
  EXPECT_EQ(after.hits, before.hits + 1);
  EXPECT_EQ(after.cached_bytes, before.cached_bytes);
  release_host_block(again, kOneMiB);
}

TEST_F(HostBlockCache, CachedPlusLiveBytesNeverPassTheHighWaterMark) {
  // 1 MiB live is the high-water mark; once released and cached, a 2 MiB request would make
  // live + cached = 3 MiB > 5/4 of the new mark of 2 MiB, so the cached 1 MiB block is freed.
  void* small = acquire_host_block(kOneMiB);
  release_host_block(small, kOneMiB);
  const HostBlockCacheStats cached = host_block_cache_stats();
  EXPECT_EQ(cached.cached_bytes, static_cast<int64_t>(kOneMiB));
  void* large = acquire_host_block(kTwoMiB);
  ASSERT_NE(large, nullptr);
  const HostBlockCacheStats after = host_block_cache_stats();
  EXPECT_EQ(after.cached_bytes, 0);
  EXPECT_EQ(after.evicted_blocks, cached.evicted_blocks + 1);
  EXPECT_LE(4 * (after.live_bytes + after.cached_bytes), 5 * after.high_water);
  // Two live blocks (3 MiB) raise the mark; both then stay cached.
  void* other = acquire_host_block(kOneMiB);
  release_host_block(other, kOneMiB);
  release_host_block(large, kTwoMiB);
  const HostBlockCacheStats end = host_block_cache_stats();
  EXPECT_EQ(end.cached_bytes, static_cast<int64_t>(kOneMiB + kTwoMiB));
  EXPECT_LE(4 * (end.live_bytes + end.cached_bytes), 5 * end.high_water);
}

TEST_F(HostBlockCache, SmallBlocksAndADisabledCacheGoStraightToMalloc) {
  const HostBlockCacheStats before = host_block_cache_stats();
  void* small = acquire_host_block(kBlockCacheMinBytes - 64);
  release_host_block(small, kBlockCacheMinBytes - 64);
  EXPECT_EQ(host_block_cache_stats().cached_bytes, before.cached_bytes);
  EXPECT_EQ(host_block_cache_stats().misses, before.misses);

  set_host_block_cache_enabled(false);
  void* block = acquire_host_block(kOneMiB);
  release_host_block(block, kOneMiB);
  EXPECT_EQ(host_block_cache_stats().cached_bytes, 0);
}

TEST_F(HostBlockCache, TensorStorageComesFromTheCache) {
  void* data = nullptr;
  {
    Tensor tensor = Tensor::empty(Shape{static_cast<int64_t>(kOneMiB / 4)}, DType::f32);
    data = tensor.ptr<float>();
  }
  Tensor again = Tensor::empty(Shape{static_cast<int64_t>(kOneMiB / 4)}, DType::f32);
  EXPECT_EQ(again.ptr<float>(), data);
}

}  // namespace
}  // namespace lathe
