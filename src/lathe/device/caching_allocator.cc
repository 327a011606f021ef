#include "lathe/device/caching_allocator.h"

#include <algorithm>
#include <cstdio>

#include "lathe/core/error.h"

namespace lathe::cuda {

int64_t CachingAllocator::rounded_size(int64_t bytes) {
  constexpr int64_t kSmall = 512, kLarge = 2 << 20, kSmallLimit = 1 << 20;
  const int64_t unit = bytes <= kSmallLimit ? kSmall : kLarge;
  return std::max<int64_t>(unit, (bytes + unit - 1) / unit * unit);
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void* CachingAllocator::allocate(int64_t bytes, const std::string& what) {
  LATHE_CHECK(bytes >= 0, "device allocation of ", bytes, " bytes for ", what);
  const int64_t size = rounded_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* pointer = nullptr;
  auto cached = free_blocks_.find(size);
  if (cached != free_blocks_.end() && !cached->second.empty()) {
    pointer = cached->second.back();
    cached->second.pop_back();
    stats_.cached -= size;
    ++stats_.cache_hits;
  } else {
    pointer = backend_.allocate(size);
    if (pointer == nullptr && stats_.cached > 0) {
      release_cached_locked();  // fragmentation across sizes: give everything back and retry once
      pointer = backend_.allocate(size);
    }
    if (pointer == nullptr) {
      int64_t free_bytes = 0, total_bytes = 0;
      if (backend_.memory_info) backend_.memory_info(&free_bytes, &total_bytes);
      throw_error("CUDA out of memory allocating ", format_bytes(bytes), " for ", what, ": ",
                  format_bytes(stats_.in_use), " in use by lathe tensors, ", format_bytes(stats_.cached), " cached, ",
                  format_bytes(free_bytes), " free of ", format_bytes(total_bytes), " on the device");
    }
    ++stats_.backend_allocations;
  }
  live_blocks_[pointer] = size;
  ++stats_.allocations;
  stats_.in_use += size;
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  return pointer;
}

void CachingAllocator::free(void* pointer) {
  if (pointer == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto live = live_blocks_.find(pointer);
  LATHE_ASSERT(live != live_blocks_.end());
  const int64_t size = live->second;
  live_blocks_.erase(live);
  stats_.in_use -= size;
  stats_.cached += size;
  free_blocks_[size].push_back(pointer);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [size, blocks] : free_blocks_)
    for (void* block : blocks) backend_.release(block);
  free_blocks_.clear();
  stats_.cached = 0;
}

DeviceMemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.in_use;
}

std::string format_bytes(int64_t bytes) {
  char text[64];
  const double value = static_cast<double>(bytes);
  if (bytes < 1024)
    std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  else if (bytes < (int64_t{1} << 20))
    std::snprintf(text, sizeof text, "%.2f KiB", value / 1024);
  else if (bytes < (int64_t{1} << 30))
    std::snprintf(text, sizeof text, "%.2f MiB", value / (1 << 20));
  else
    std::snprintf(text, sizeof text, "%.2f GiB", value / (1 << 30));
  return text;
}

}  // namespace lathe::cuda
