#include "lathe/io/checksum.h"

#include <fcntl.h>
#include <nmmintrin.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "lathe/core/cpu_features.h"
#include "lathe/io/durable_file.h"
#include "lathe/core/error.h"

namespace lathe {

namespace {

constexpr uint32_t kReflectedPolynomial = 0x82F63B78u;  // 0x1EDC6F41 bit-reversed

// tables[k][b]: the CRC contribution of byte b followed by k zero bytes (slicing-by-8).
using SliceTables = std::array<std::array<uint32_t, 256>, 8>;

SliceTables make_slice_tables() {
  SliceTables tables{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kReflectedPolynomial : 0u);
    tables[0][byte] = crc;
  }
  for (int k = 1; k < 8; ++k)
    for (int byte = 0; byte < 256; ++byte)
      tables[k][byte] = (tables[k - 1][byte] >> 8) ^ tables[0][tables[k - 1][byte] & 0xffu];
  return tables;
}

const SliceTables& slice_tables() {
  static const SliceTables tables = make_slice_tables();
  return tables;
}

}  // namespace

uint32_t crc32c_update_table(uint32_t state, const void* data, size_t bytes) {
  const SliceTables& t = slice_tables();
  const auto* p = static_cast<const unsigned char*>(data);
  while (bytes >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian: the first byte is the lowest
    word ^= state;
    state = t[7][word & 0xff] ^ t[6][(word >> 8) & 0xff] ^ t[5][(word >> 16) & 0xff] ^ t[4][(word >> 24) & 0xff] ^
            t[3][(word >> 32) & 0xff] ^ t[2][(word >> 40) & 0xff] ^ t[1][(word >> 48) & 0xff] ^ t[0][word >> 56];
    p += 8;
    bytes -= 8;
  }
  while (bytes--) state = (state >> 8) ^ t[0][(state ^ *p++) & 0xffu];
  return state;
}

// The crc32 instruction implements exactly this polynomial with the same bit order; only the
// initial value and final xor are left to the caller, as in the table form.
__attribute__((target("sse4.2"))) uint32_t crc32c_update_hardware(uint32_t state, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t wide = state;
  while (bytes >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    wide = _mm_crc32_u64(wide, word);
    p += 8;
    bytes -= 8;
  }
  state = static_cast<uint32_t>(wide);
  while (bytes--) state = _mm_crc32_u8(state, *p++);
  return state;
}

void Crc32c::update(const void* data, size_t bytes) {
  static const bool hardware = cpu_features().sse42;
  state_ = hardware ? crc32c_update_hardware(state_, data, bytes) : crc32c_update_table(state_, data, bytes);
}

uint32_t crc32c(const void* data, size_t bytes) {
  Crc32c crc;
  crc.update(data, bytes);
  return crc.value();
}

uint32_t crc32c_of_file(const std::string& path, int64_t* file_bytes) {
  Crc32c crc;
  const int64_t total =
      read_file_chunks(path, size_t{4} << 20, [&](const char* data, size_t bytes) { crc.update(data, bytes); });
  if (file_bytes) *file_bytes = total;
  return crc.value();
}

std::string format_crc32c(uint32_t checksum) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", checksum);
  return text;
}

uint32_t parse_crc32c(const std::string& text, const std::string& what) {
  bool valid = text.size() == 10 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  uint32_t value = 0;
  for (size_t i = 2; valid && i < text.size(); ++i) {
    char c = text[i];
    uint32_t digit = 0;
    if (c >= '0' && c <= '9')
      digit = static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      digit = static_cast<uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      digit = static_cast<uint32_t>(c - 'A' + 10);
    else
      valid = false;
    value = (value << 4) | digit;
  }
  LATHE_CHECK(valid, what, ": expected a CRC-32C as 0x followed by 8 hex digits, found \"", text, "\"");
  return value;
}

}  // namespace lathe
