// A fast 64-bit non-cryptographic hash, used as the payload checksum of token shards and as the
// cache key of prepared datasets. Chaining is how to hash several pieces:
//   uint64_t h = hash_bytes(a.data(), a.size());  h = hash_bytes(b.data(), b.size(), h);
// The value is part of the on-disk shard format: never change the function, add a new one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lathe {

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);
inline uint64_t hash_string(std::string_view text, uint64_t seed = 0) {
  return hash_bytes(text.data(), text.size(), seed);
}
// 16 lowercase hex digits.
std::string hex64(uint64_t value);

}  // namespace lathe
