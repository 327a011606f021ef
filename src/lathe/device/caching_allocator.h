// A caching allocator for device memory: cudaMalloc and cudaFree synchronise the device and cost
// tens of microseconds, so freed blocks are kept and handed out again to requests of the same
// rounded size (a training step asks for the same sizes every step). The backend (raw allocate,
// raw free, free/total memory) is a parameter, so the caching logic is tested on the host.
//
// Sizes are rounded up to 512 bytes below 1 MiB and to 2 MiB above. When the backend fails, the
// cache is emptied and the request tried once more; if that fails too, lathe::Error names the
// request and the memory in use, e.g.
//   "CUDA out of memory allocating 2.00 GiB for matmul output cuda:f32(32768, 16384): 120.3 GiB in
//    use by lathe tensors, 0.0 GiB cached, 1.2 GiB free of 139.8 GiB on the device"
// Nothing already allocated is touched by a failure (a checkpoint being written stays valid).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace lathe::cuda {

struct DeviceMemoryStats {
  int64_t in_use = 0;               // bytes of live blocks (rounded sizes)
  int64_t peak = 0;                 // high-water mark of in_use
  int64_t cached = 0;               // bytes of freed blocks kept for reuse
  int64_t allocations = 0;          // requests served
  int64_t cache_hits = 0;           // requests served from the cache
  int64_t backend_allocations = 0;  // requests that reached the backend (cudaMalloc)
};

class CachingAllocator {
 public:
  struct Backend {
    std::function<void*(int64_t bytes)> allocate;  // nullptr when out of memory
    std::function<void(void* pointer)> release;
    std::function<void(int64_t* free_bytes, int64_t* total_bytes)> memory_info;
  };

  explicit CachingAllocator(Backend backend) : backend_(std::move(backend)) {}
  ~CachingAllocator();  // returns the cached blocks to the backend
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // `what` names the tensor in an out-of-memory error. bytes 0 gives a valid 512-byte block.
  void* allocate(int64_t bytes, const std::string& what);
  void free(void* pointer);  // back to the cache; pointer must come from allocate()
  void empty_cache();        // returns every cached block to the backend
  DeviceMemoryStats stats() const;
  void reset_peak();

  static int64_t rounded_size(int64_t bytes);

 private:
  void release_cached_locked();

  Backend backend_;
  mutable std::mutex mutex_;
  std::map<int64_t, std::vector<void*>> free_blocks_;  // rounded size -> cached blocks
  std::unordered_map<void*, int64_t> live_blocks_;     // pointer -> rounded size
  DeviceMemoryStats stats_;
};

// Bytes in a human unit for messages: "512 B", "1.50 KiB", "3.25 MiB", "2.00 GiB".
std::string format_bytes(int64_t bytes);

}  // namespace lathe::cuda
