#include "lathe/io/hash64.h"

#include <cstdio>
#include <cstring>

namespace lathe {
namespace {

constexpr uint64_t kMultiplier1 = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kMultiplier2 = 0xC2B2AE3D27D4EB4Full;

uint64_t rotate_left(uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

// splitmix64's finaliser: every input bit affects every output bit.
uint64_t finalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed) {
  const unsigned char* bytes = static_cast<const unsigned char*>(data);
  // Four independent lanes keep the multiplier pipelines busy (about 4x one serial chain).
  uint64_t lanes[4] = {seed ^ kMultiplier1, seed + kMultiplier2, seed, seed - kMultiplier1};
  size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t word;
      std::memcpy(&word, bytes + i + 8 * lane, 8);
      lanes[lane] = rotate_left(lanes[lane] + word * kMultiplier2, 31) * kMultiplier1;
    }
  }
  uint64_t hash = static_cast<uint64_t>(size) * kMultiplier1;
  for (int lane = 0; lane < 4; ++lane) hash = rotate_left(hash ^ finalize(lanes[lane]), 27) * kMultiplier2;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    hash = rotate_left(hash ^ (word * kMultiplier2), 31) * kMultiplier1;
  }
  if (i < size) {
    uint64_t word = 0;
    std::memcpy(&word, bytes + i, size - i);
    hash = rotate_left(hash ^ (word * kMultiplier2), 31) * kMultiplier1;
  }
  return finalize(hash);
}

std::string hex64(uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(value));
  return buffer;
}

}  // namespace lathe
