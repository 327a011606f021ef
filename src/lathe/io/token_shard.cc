#include "lathe/io/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "lathe/core/error.h"
#include "lathe/io/hash64.h"

namespace lathe {
namespace {

static_assert(std::endian::native == std::endian::little, "token shards are read and written little-endian");

constexpr char kMagic[8] = {'L', 'A', 'T', 'H', 'E', 'T', 'O', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kHeaderChecksumOffset = 40;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t bytes_per_token;
  uint64_t token_count;
  uint64_t vocab_size;
  uint64_t payload_checksum;
  uint64_t header_checksum;
  unsigned char reserved[16];
};
static_assert(sizeof(Header) == kHeaderBytes);

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    LATHE_CHECK(written > 0, "cannot write ", path, " (", std::strerror(errno), ")");
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

std::string parent_folder(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

template <class Element>
std::vector<unsigned char> pack_payload(std::span<const int32_t> tokens) {
  std::vector<unsigned char> payload(tokens.size() * sizeof(Element));
  for (size_t i = 0; i < tokens.size(); ++i) {
    Element value = static_cast<Element>(tokens[i]);
    std::memcpy(payload.data() + i * sizeof(Element), &value, sizeof(Element));
  }
  return payload;
}

}  // namespace

void write_token_shard(const std::string& path, std::span<const int32_t> tokens, int64_t vocab_size) {
  LATHE_CHECK(vocab_size >= 1 && vocab_size <= (int64_t{1} << 31), "token shard ", path, ": vocabulary size ",
              vocab_size, " is out of range");
  for (size_t i = 0; i < tokens.size(); ++i)
    LATHE_CHECK(tokens[i] >= 0 && tokens[i] < vocab_size, "token shard ", path, ": token ", tokens[i], " at position ",
                i, " is outside the vocabulary (size ", vocab_size, ")");
  const uint32_t bytes_per_token = vocab_size <= 65536 ? 2 : 4;
  std::vector<unsigned char> payload =
      bytes_per_token == 2 ? pack_payload<uint16_t>(tokens) : pack_payload<uint32_t>(tokens);
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof kMagic);
  header.version = kVersion;
  header.bytes_per_token = bytes_per_token;
  header.token_count = tokens.size();
  header.vocab_size = static_cast<uint64_t>(vocab_size);
  header.payload_checksum = hash_bytes(payload.data(), payload.size());
  header.header_checksum = hash_bytes(&header, kHeaderChecksumOffset);

  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LATHE_CHECK(fd >= 0, "cannot create ", temporary, " (", std::strerror(errno), ")");
  try {
    write_all(fd, &header, sizeof header, temporary);
    write_all(fd, payload.data(), payload.size(), temporary);
    LATHE_CHECK(::fsync(fd) == 0, "cannot sync ", temporary, " (", std::strerror(errno), ")");
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    int error = errno;
    ::unlink(temporary.c_str());
    throw_error("cannot rename ", temporary, " to ", path, " (", std::strerror(error), ")");
  }
  // Make the rename itself durable.
  int folder = ::open(parent_folder(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder >= 0) {
    ::fsync(folder);
    ::close(folder);
  }
}

TokenShard TokenShard::open(const std::string& path) {
  TokenShard shard;
  shard.path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  LATHE_CHECK(fd >= 0, "cannot open token shard ", path, " (", std::strerror(errno), ")");
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    ::close(fd);
    throw_error("cannot stat token shard ", path);
  }
  size_t file_bytes = static_cast<size_t>(info.st_size);
  if (file_bytes < kHeaderBytes) {
    ::close(fd);
    throw_error("token shard ", path, ": file has ", file_bytes, " bytes, too short for the ", kHeaderBytes,
                "-byte header (truncated or not a shard)");
  }
  void* mapping = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  LATHE_CHECK(mapping != MAP_FAILED, "cannot map token shard ", path, " (", std::strerror(errno), ")");
  shard.mapping_ = mapping;
  shard.mapping_bytes_ = file_bytes;  // from here on, the destructor unmaps on any error

  Header header;
  std::memcpy(&header, mapping, sizeof header);
  LATHE_CHECK(std::memcmp(header.magic, kMagic, sizeof kMagic) == 0, "token shard ", path,
              ": bad magic (not a lathe token shard)");
  LATHE_CHECK(header.version == kVersion, "token shard ", path, ": format version ", header.version,
              " is not supported (this build reads version ", kVersion, ")");
  LATHE_CHECK(header.header_checksum == hash_bytes(&header, kHeaderChecksumOffset), "token shard ", path,
              ": header checksum mismatch (corrupted header)");
  LATHE_CHECK(header.bytes_per_token == 2 || header.bytes_per_token == 4, "token shard ", path, ": ",
              header.bytes_per_token, " bytes per token (expected 2 or 4)");
  LATHE_CHECK(header.vocab_size >= 1 && header.vocab_size <= (uint64_t{1} << 31), "token shard ", path,
              ": vocabulary size ", header.vocab_size, " is out of range");
  LATHE_CHECK(header.bytes_per_token == 4 || header.vocab_size <= 65536, "token shard ", path, ": vocabulary size ",
              header.vocab_size, " does not fit 2-byte tokens");
  size_t payload_bytes = file_bytes - kHeaderBytes;
  LATHE_CHECK(header.token_count <= payload_bytes / header.bytes_per_token &&
                  header.token_count * header.bytes_per_token == payload_bytes,
              "token shard ", path, ": header says ", header.token_count, " tokens (",
              header.token_count * header.bytes_per_token, " bytes) but the file holds ", payload_bytes,
              " payload bytes (truncated or corrupted)");
  shard.payload_ = static_cast<const unsigned char*>(mapping) + kHeaderBytes;
  LATHE_CHECK(hash_bytes(shard.payload_, payload_bytes) == header.payload_checksum, "token shard ", path,
              ": payload checksum mismatch (corrupted data)");
  shard.token_count_ = static_cast<int64_t>(header.token_count);
  shard.vocab_size_ = static_cast<int64_t>(header.vocab_size);
  shard.bytes_per_token_ = static_cast<int>(header.bytes_per_token);
  shard.checksum_ = header.payload_checksum;
  for (int64_t i = 0; i < shard.token_count_; ++i) {
    int32_t token = shard.token(i);
    LATHE_CHECK(token >= 0 && token < shard.vocab_size_, "token shard ", path, ": token ", token, " at position ", i,
                " is outside the vocabulary (size ", shard.vocab_size_, ")");
  }
  return shard;
}

int32_t TokenShard::token(int64_t index) const {
  LATHE_ASSERT(index >= 0 && index < token_count_);
  const unsigned char* at = payload_ + static_cast<size_t>(index) * bytes_per_token_;
  if (bytes_per_token_ == 2) {
    uint16_t value;
    std::memcpy(&value, at, 2);
    return value;
  }
  uint32_t value;
  std::memcpy(&value, at, 4);
  return static_cast<int32_t>(value);
}

void TokenShard::copy_tokens(int64_t begin, int64_t count, int32_t* out) const {
  LATHE_ASSERT(begin >= 0 && count >= 0 && begin + count <= token_count_);
  if (bytes_per_token_ == 4) {
    std::memcpy(out, payload_ + static_cast<size_t>(begin) * 4, static_cast<size_t>(count) * 4);
    return;
  }
  const unsigned char* at = payload_ + static_cast<size_t>(begin) * 2;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t value;
    std::memcpy(&value, at + 2 * i, 2);
    out[i] = value;
  }
}

std::vector<int32_t> TokenShard::tokens(int64_t begin, int64_t count) const {
  std::vector<int32_t> out(static_cast<size_t>(count));
  copy_tokens(begin, count, out.data());
  return out;
}

void TokenShard::unmap() {
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
  mapping_ = nullptr;
  payload_ = nullptr;
}

TokenShard::TokenShard(TokenShard&& other) noexcept { *this = std::move(other); }

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this == &other) return *this;
  unmap();
  path_ = std::move(other.path_);
  mapping_ = other.mapping_;
  mapping_bytes_ = other.mapping_bytes_;
  payload_ = other.payload_;
  token_count_ = other.token_count_;
  vocab_size_ = other.vocab_size_;
  bytes_per_token_ = other.bytes_per_token_;
  checksum_ = other.checksum_;
  other.mapping_ = nullptr;
  other.payload_ = nullptr;
  other.token_count_ = 0;
  return *this;
}

TokenShard::~TokenShard() { unmap(); }

}  // namespace lathe
