#include "lathe/telemetry/tfrecord.h"

#include <fstream>
#include <iterator>

#include "lathe/core/error.h"
#include "lathe/io/checksum.h"

namespace lathe {
namespace {

void append_little_endian(std::string& out, uint64_t value, int size) {
  for (int i = 0; i < size; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

uint64_t load_little_endian(std::string_view bytes, size_t offset, int size) {
  uint64_t value = 0;
  for (int i = 0; i < size; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return value;
}

}  // namespace

std::string frame_tfrecord(std::string_view payload) {
  std::string record;
  record.reserve(payload.size() + 16);
  append_little_endian(record, payload.size(), 8);
  append_little_endian(record, mask_crc32c(crc32c(record.data(), 8)), 4);
  record.append(payload);
  append_little_endian(record, mask_crc32c(crc32c(payload.data(), payload.size())), 4);
  return record;
}

std::vector<std::string> parse_tfrecords(std::string_view data, const std::string& source) {
  std::vector<std::string> payloads;
  size_t offset = 0;
  while (offset < data.size()) {
    size_t index = payloads.size();
    LATHE_CHECK(data.size() - offset >= 12, source, ": record ", index, " at byte ", offset,
                " is truncated (header needs 12 bytes, ", data.size() - offset, " left)");
    uint64_t length = load_little_endian(data, offset, 8);
    LATHE_CHECK(mask_crc32c(crc32c(data.data() + offset, 8)) == load_little_endian(data, offset + 8, 4), source,
                ": record ", index, " at byte ", offset, " has a corrupt length (CRC mismatch)");
    size_t payload_offset = offset + 12;
    LATHE_CHECK(length <= data.size() - payload_offset && data.size() - payload_offset - length >= 4, source,
                ": record ", index, " at byte ", offset, " is truncated (", length, "-byte payload + 4-byte CRC, ",
                data.size() - payload_offset, " left)");
    std::string_view payload = data.substr(payload_offset, length);
    LATHE_CHECK(
        mask_crc32c(crc32c(payload.data(), payload.size())) == load_little_endian(data, payload_offset + length, 4),
        source, ": record ", index, " at byte ", offset, " has a corrupt payload (CRC mismatch)");
    payloads.emplace_back(payload);
    offset = payload_offset + length + 4;
  }
  return payloads;
}

std::vector<std::string> read_tfrecord_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  LATHE_CHECK(file.good(), "cannot open TFRecord file ", path);
  std::string data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  LATHE_CHECK(!file.bad(), "failed reading TFRecord file ", path);
  return parse_tfrecords(data, path);
}

}  // namespace lathe
