// TFRecord framing, the container of TensorBoard event files. Each record is
//   uint64 length (LE) | uint32 masked CRC-32C of those 8 bytes | payload | uint32 masked CRC-32C
//   of the payload
// (CRC-32C from io/checksum.h, masked as below). Readers use the CRCs to detect torn or corrupted writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// TFRecord stores CRC-32C values masked (rotated and offset), so data that embeds CRCs does not
// checksum to trivial values.
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t unmask_crc32c(uint32_t masked) {
  uint32_t rotated = masked - 0xa282ead8u;
  return (rotated >> 17) | (rotated << 15);
}

// The framed bytes of one record.
std::string frame_tfrecord(std::string_view payload);

// Splits a buffer of concatenated records into payloads. Throws lathe::Error naming `source`,
// the record index and its byte offset on a CRC mismatch or a truncated record.
std::vector<std::string> parse_tfrecords(std::string_view data, const std::string& source);

// Reads and parses a whole file; errors name the file.
std::vector<std::string> read_tfrecord_file(const std::string& path);

}  // namespace lathe
