#include "lathe/core/host_block_cache.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "lathe/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define LATHE_POISON(block, bytes) ASAN_POISON_MEMORY_REGION(block, bytes)
#define LATHE_UNPOISON(block, bytes) ASAN_UNPOISON_MEMORY_REGION(block, bytes)
#else
#define LATHE_POISON(block, bytes) ((void)(block), (void)(bytes))
#define LATHE_UNPOISON(block, bytes) ((void)(block), (void)(bytes))
#endif

namespace lathe {
namespace {

bool enabled_from_environment() {
  const char* value = std::getenv("LATHE_TENSOR_CACHE");
  if (value == nullptr || *value == '\0') return true;
  LATHE_CHECK(std::strcmp(value, "0") == 0 || std::strcmp(value, "1") == 0, "LATHE_TENSOR_CACHE='", value,
              "': expected 0 (off) or 1 (on)");
  return value[0] == '1';
}

struct Cache {
  std::mutex mutex;
  bool enabled = enabled_from_environment();
  std::map<size_t, std::vector<void*>> free_blocks;  // exact size -> cached blocks
  HostBlockCacheStats stats;

  // Frees the cached block of the largest size; requires the lock and cached_bytes > 0.
  void evict_largest() {
    auto largest = std::prev(free_blocks.end());
    void* block = largest->second.back();
    largest->second.pop_back();
    stats.cached_bytes -= static_cast<int64_t>(largest->first);
    ++stats.evicted_blocks;
    LATHE_UNPOISON(block, largest->first);
    std::free(block);
    if (largest->second.empty()) free_blocks.erase(largest);
  }

  void trim() {
    while (!free_blocks.empty()) evict_largest();
  }
};

// Never destroyed: tensors held by static objects are released after any static destructor.
Cache& cache() {
  static Cache* instance = new Cache;
  return *instance;
}

}  // namespace

void* acquire_host_block(size_t bytes) {
  if (bytes < kBlockCacheMinBytes) return std::aligned_alloc(64, bytes);
  Cache& state = cache();
  std::lock_guard<std::mutex> lock(state.mutex);
  HostBlockCacheStats& stats = state.stats;
  stats.live_bytes += static_cast<int64_t>(bytes);
  if (stats.live_bytes > stats.high_water) stats.high_water = stats.live_bytes;
  if (auto found = state.free_blocks.find(bytes); found != state.free_blocks.end()) {
    void* block = found->second.back();
    found->second.pop_back();
    if (found->second.empty()) state.free_blocks.erase(found);
    stats.cached_bytes -= static_cast<int64_t>(bytes);
    ++stats.hits;
    LATHE_UNPOISON(block, bytes);
    return block;
  }
  ++stats.misses;
  while (stats.cached_bytes > 0 && 4 * (stats.live_bytes + stats.cached_bytes) > 5 * stats.high_water)
    state.evict_largest();
  void* block = std::aligned_alloc(64, bytes);
  if (block == nullptr && stats.cached_bytes > 0) {  // the cache may hold what this needs
    state.trim();
    block = std::aligned_alloc(64, bytes);
  }
  if (block == nullptr) stats.live_bytes -= static_cast<int64_t>(bytes);
  return block;
}

void release_host_block(void* block, size_t bytes) {
  if (block == nullptr) return;
  if (bytes < kBlockCacheMinBytes) {
    std::free(block);
    return;
  }
  Cache& state = cache();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.stats.live_bytes -= static_cast<int64_t>(bytes);
  if (!state.enabled) {
    std::free(block);
    return;
  }
  LATHE_POISON(block, bytes);
  state.free_blocks[bytes].push_back(block);
  state.stats.cached_bytes += static_cast<int64_t>(bytes);
}

HostBlockCacheStats host_block_cache_stats() {
  Cache& state = cache();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.stats;
}

void trim_host_block_cache() {
  Cache& state = cache();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.trim();
  state.stats.high_water = state.stats.live_bytes;
}

bool set_host_block_cache_enabled(bool enabled) {
  Cache& state = cache();
  std::lock_guard<std::mutex> lock(state.mutex);
  const bool previous = state.enabled;
  state.enabled = enabled;
  if (!enabled) state.trim();
  return previous;
}

}  // namespace lathe
