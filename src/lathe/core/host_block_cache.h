#pragma once
// Reuse of tensor storage on the host.
//
// A training step frees and allocates the same large buffers every step (activations, gradients,
// the gated activation's outputs). With malloc alone each one goes back to the kernel (mmap'd
// chunks, a trimmed heap top) and comes back as fresh pages: measured ~17k page faults per step
// of the default config, 3-4% of the step (docs/perf.md). This cache keeps freed blocks of
// kBlockCacheMinBytes or more by exact size and hands them out again.
//
// Memory bound: the cached bytes plus the bytes in use stay within 5/4 of the high-water mark of
// the bytes in use: when an allocation misses and the total would pass that, cached blocks are
// freed first (largest first). Exact-size reuse needs some slack because the mix of sizes moves
// during a step (activations in the forward, gradients in the backward): the default training
// step needs 1.03x its peak for zero page faults per step; at 1.0x it still faulted 4k pages a
// step. A different allocation pattern (inference with growing lengths) degrades to malloc,
// never to unbounded growth. LATHE_TENSOR_CACHE=0 turns the cache off (every block is freed).
//
// Thread-safe (one mutex; a few hundred allocations per step). Under AddressSanitizer a cached
// block is poisoned, so a use after free is still reported.
#include <cstddef>
#include <cstdint>

namespace lathe {

inline constexpr size_t kBlockCacheMinBytes = size_t{64} << 10;  // smaller blocks: malloc is fine

// A 64-byte aligned block of exactly `bytes` (a multiple of 64, > 0); nullptr when out of memory.
void* acquire_host_block(size_t bytes);
// Returns a block from acquire_host_block with the same `bytes`.
void release_host_block(void* block, size_t bytes);

struct HostBlockCacheStats {
  int64_t hits = 0;            // allocations served from the cache
  int64_t misses = 0;          // allocations of cacheable size that went to malloc
  int64_t cached_bytes = 0;    // bytes held for reuse now
  int64_t live_bytes = 0;      // bytes of cacheable size handed out and not yet returned
  int64_t high_water = 0;      // the most live_bytes seen: live + cached <= 5/4 of it
  int64_t evicted_blocks = 0;  // cached blocks freed to stay within the bound
};
HostBlockCacheStats host_block_cache_stats();
// Frees every cached block and lowers the bound to the bytes in use now: the cache starts over
// (e.g. after a phase whose peak the next one will not reach).
void trim_host_block_cache();
// Switches the cache on or off for this process (off also trims); returns the previous state.
// The initial state comes from LATHE_TENSOR_CACHE (default on).
bool set_host_block_cache_enabled(bool enabled);

}  // namespace lathe
