#include "lathe/data/shuffle.h"

#include <numeric>
#include <utility>

#include "lathe/core/error.h"
#include "lathe/core/rng.h"

namespace lathe {

uint64_t random_below(uint64_t seed, uint64_t stream, uint64_t index, uint64_t bound) {
  LATHE_ASSERT(bound > 0);
  auto block = philox4x32(index, stream, seed);
  uint64_t bits = (static_cast<uint64_t>(block[0]) << 32) | block[1];
  // Multiply-high maps 64 random bits onto [0, bound) with a bias below bound / 2^64.
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * bound) >> 64);
}

std::vector<int64_t> shuffled_indices(int64_t count, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = count - 1; i > 0; --i) {
    int64_t j =
        static_cast<int64_t>(random_below(seed, stream, static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

}  // namespace lathe
