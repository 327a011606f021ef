// The caching allocator's logic on a fake backend (host memory with a byte budget): reuse of
// freed blocks, rounding, statistics, and the out-of-memory path (empty the cache, retry once,
// then one error naming the request and the memory in use, with live blocks untouched).
#include "lathe/device/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "lathe/core/error.h"

namespace lathe::cuda {
namespace {

struct FakeDevice {
  explicit FakeDevice(int64_t budget_bytes) : budget(budget_bytes) {}
  int64_t budget, used = 0;
  std::set<void*> live;
  int64_t backend_calls = 0;

  CachingAllocator::Backend backend() {
    return {[this](int64_t bytes) -> void* {
              ++backend_calls;
              if (used + bytes > budget) return nullptr;
              used += bytes;
              void* pointer = std::malloc(static_cast<size_t>(bytes));
              live.insert(pointer);
              sizes[pointer] = bytes;
              return pointer;
            },
            [this](void* pointer) {
              used -= sizes.at(pointer);
              live.erase(pointer);
              std::free(pointer);
            },
            [this](int64_t* free_bytes, int64_t* total_bytes) {
              *free_bytes = budget - used;
              *total_bytes = budget;
            }};
  }
  std::map<void*, int64_t> sizes;
};

TEST(CachingAllocator, RoundsSmallSizesTo512BytesAndLargeTo2MiB) {
  EXPECT_EQ(CachingAllocator::rounded_size(0), 512);
  EXPECT_EQ(CachingAllocator::rounded_size(1), 512);
  EXPECT_EQ(CachingAllocator::rounded_size(513), 1024);
  EXPECT_EQ(CachingAllocator::rounded_size(1 << 20), 1 << 20);
  EXPECT_EQ(CachingAllocator::rounded_size((1 << 20) + 1), 2 << 20);
  EXPECT_EQ(CachingAllocator::rounded_size((5 << 20) + 7), 6 << 20);
}

TEST(CachingAllocator, FreedBlocksAreReusedForTheSameRoundedSize) {
  FakeDevice device(int64_t{64} << 20);
  {
    CachingAllocator allocator(device.backend());
    void* first = allocator.allocate(1000, "a");
    allocator.free(first);
    void* again = allocator.allocate(1020, "b");  // same 1024-byte class
    EXPECT_EQ(again, first);
    void* other = allocator.allocate(3000, "c");  // another class: a new block
    EXPECT_NE(other, first);
    const DeviceMemoryStats stats = allocator.stats();
    EXPECT_EQ(stats.allocations, 3);
    EXPECT_EQ(stats.cache_hits, 1);
    EXPECT_EQ(stats.backend_allocations, 2);
    EXPECT_EQ(stats.in_use, 1024 + 3072);
    EXPECT_EQ(stats.peak, 1024 + 3072);
    allocator.free(again);
    allocator.free(other);
    EXPECT_EQ(allocator.stats().in_use, 0);
    EXPECT_EQ(allocator.stats().cached, 1024 + 3072);
  }
  EXPECT_TRUE(device.live.empty()) << "the destructor returns cached blocks";
}

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheRetriesThenNamesTheRequest) {
  FakeDevice device(int64_t{8} << 20);
  CachingAllocator allocator(device.backend());
  void* cached = allocator.allocate(int64_t{4} << 20, "first");
  allocator.free(cached);                                      // 4 MiB cached, 4 MiB free on the device
  void* big = allocator.allocate(int64_t{6} << 20, "second");  // fits only once the cache is emptied
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(allocator.stats().cached, 0);
  try {
    allocator.allocate(int64_t{4} << 20, "the logits of step 3");
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("CUDA out of memory allocating 4.00 MiB for the logits of step 3"), std::string::npos)
        << message;
    EXPECT_NE(message.find("6.00 MiB in use by lathe tensors"), std::string::npos) << message;
    EXPECT_NE(message.find("2.00 MiB free of 8.00 MiB"), std::string::npos) << message;
  }
  EXPECT_EQ(allocator.stats().in_use, int64_t{6} << 20) << "a failed request leaves live blocks alone";
  EXPECT_TRUE(device.live.count(big));
  allocator.free(big);
}

TEST(CachingAllocator, FormatsBytesInTheLargestFittingUnit) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(int64_t{3} << 20), "3.00 MiB");
  EXPECT_EQ(format_bytes(int64_t{5} << 29), "2.50 GiB");
}

}  // namespace
}  // namespace lathe::cuda
