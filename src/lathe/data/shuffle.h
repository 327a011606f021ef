// Deterministic shuffles for data order: a Fisher-Yates permutation driven by the counter-based
// Philox generator (core/rng.h), so a permutation depends only on (seed, stream, count): never
// on the machine, the thread count or the batch size.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

// Streams in use, kept apart so no two shuffles share random numbers.
inline constexpr uint64_t kDocumentSplitStream = uint64_t{1} << 62;                   // train/validation split
inline uint64_t epoch_stream(int64_t epoch) { return static_cast<uint64_t>(epoch); }  // loader order

// A uniformly random integer in [0, bound) for element `index` of a stream.
uint64_t random_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t bound);
// A permutation of 0 .. count-1.
std::vector<int64_t> shuffled_indices(int64_t count, uint64_t seed, uint64_t stream);

}  // namespace lathe
