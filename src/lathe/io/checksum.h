// CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected, initial value and final xor 0xFFFFFFFF),
// the checksum of iSCSI, ext4 metadata and many storage formats. Published check value:
// crc32c("123456789") == 0xE3069283. Checkpoint manifests record it for every file.
// Uses the SSE4.2 crc32 instruction when the CPU has it, else a slicing-by-8 table; both give
// identical results (tested).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lathe {

// Incremental form: feed bytes in any split, read the checksum of everything fed so far.
class Crc32c {
 public:
  void update(const void* data, size_t bytes);
  uint32_t value() const { return ~state_; }

 private:
  uint32_t state_ = 0xFFFFFFFFu;
};

uint32_t crc32c(const void* data, size_t bytes);

// The checksum of a whole file, read in large chunks; throws lathe::Error naming the file when it
// cannot be read. *file_bytes (optional) receives the number of bytes read.
uint32_t crc32c_of_file(const std::string& path, int64_t* file_bytes = nullptr);

// For tests: the two implementations directly (the hardware one only when cpu_features().sse42).
uint32_t crc32c_update_table(uint32_t state, const void* data, size_t bytes);
uint32_t crc32c_update_hardware(uint32_t state, const void* data, size_t bytes);

// "0xe3069283": how manifests write a checksum, and the parser for it (throws lathe::Error naming
// `what` when the text is not 0x followed by 8 hex digits).
std::string format_crc32c(uint32_t checksum);
uint32_t parse_crc32c(const std::string& text, const std::string& what);

}  // namespace lathe
