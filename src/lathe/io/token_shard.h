// Token shards: a flat stream of token ids on disk, memory-mapped for reading.
//
// File layout (little-endian), a 64-byte header then the payload:
//   0  char[8]  magic "LATHETOK"
//   8  u32      format version (1)
//   12 u32      bytes per token: 2 (uint16, vocab_size <= 65536) or 4 (uint32)
//   16 u64      token count
//   24 u64      vocabulary size (every token is below it)
//   32 u64      payload checksum (hash_bytes of the payload, io/hash64.h)
//   40 u64      header checksum (hash_bytes of bytes 0..40)
//   48 u8[16]   zero
//   64 ...      tokens
// Writing is atomic (temporary file, fsync, rename), so a reader never sees half a shard.
// Opening validates everything (magic, version, sizes against the file length, checksums, tokens
// below the vocabulary size) and throws lathe::Error naming the file and the problem.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace lathe {

void write_token_shard(const std::string& path, std::span<const int32_t> tokens, int64_t vocab_size);

class TokenShard {
 public:
  static TokenShard open(const std::string& path);

  int64_t size() const { return token_count_; }
  int64_t vocab_size() const { return vocab_size_; }
  int bytes_per_token() const { return bytes_per_token_; }
  uint64_t checksum() const { return checksum_; }  // of the payload: identifies the content
  const std::string& path() const { return path_; }

  int32_t token(int64_t index) const;
  // tokens [begin, begin + count) -> out (count int32 values)
  void copy_tokens(int64_t begin, int64_t count, int32_t* out) const;
  std::vector<int32_t> tokens(int64_t begin, int64_t count) const;

  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  ~TokenShard();

 private:
  TokenShard() = default;
  void unmap();

  std::string path_;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  const unsigned char* payload_ = nullptr;
  int64_t token_count_ = 0;
  int64_t vocab_size_ = 0;
  int bytes_per_token_ = 2;
  uint64_t checksum_ = 0;
};

}  // namespace lathe
