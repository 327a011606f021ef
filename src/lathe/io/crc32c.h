// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by TFRecord framing, iSCSI and
// ext4. Software implementation (slicing-by-8 tables), so it runs on any x86-64 and gives the
// same value everywhere. crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lathe {

// CRC-32C of `size` bytes. To checksum data in pieces, pass the previous result as `crc`:
// crc32c(b, nb, crc32c(a, na)) == crc32c(a followed by b).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view bytes, uint32_t crc = 0) { return crc32c(bytes.data(), bytes.size(), crc); }

// TFRecord's masked form: a CRC stored next to the data it covers is rotated and offset, so that
// checksumming a buffer that itself contains CRCs does not degenerate.
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask_crc32c(uint32_t masked) {
  uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace lathe
