// Test seeds: fresh every run (so repeated CI runs cover new inputs), fixed by LATHE_TEST_SEED
// to reproduce a failure. Every failure message includes the seed.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace lathe {

inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("LATHE_TEST_SEED")) return static_cast<uint64_t>(std::strtoull(env, nullptr, 10));
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) % 1000000007u;
  }();
  return seed;
}

}  // namespace lathe
