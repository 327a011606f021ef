#include "lathe/io/checksum.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "lathe/core/cpu_features.h"
#include "lathe/core/error.h"
#include "lathe/core/rng.h"
#include "scratch_directory.h"
#include "test_seed.h"

namespace lathe {
namespace {

// A bit-at-a-time CRC-32C straight from the definition, independent of both fast paths.
uint32_t crc32c_bitwise(const unsigned char* data, size_t bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < bytes; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

std::vector<unsigned char> random_bytes(size_t count, uint64_t seed) {
  std::vector<unsigned char> bytes(count);
  for (size_t i = 0; i < count; ++i) bytes[i] = static_cast<unsigned char>(uniform_at(seed, 7, i) * 256);
  return bytes;
}

TEST(Crc32c, MatchesPublishedCheckValues) {
  // The CRC catalogue's check value for CRC-32C, and the RFC 3720 (iSCSI) B.4 vectors.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0x00), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down.data(), 32), 0x113FDB5Cu);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
}

TEST(Crc32c, TableHardwareAndBitwiseAgreeOnRandomLengthsAndSplits) {
  uint64_t seed = test_seed();
  std::vector<unsigned char> data = random_bytes(5008, seed);  // lengths below + a misaligned start fit
  for (size_t length : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63}, size_t{4999}}) {
    uint32_t expected = crc32c_bitwise(data.data(), length);
    EXPECT_EQ(~crc32c_update_table(0xFFFFFFFFu, data.data(), length), expected) << "length " << length;
    if (cpu_features().sse42) {
      EXPECT_EQ(~crc32c_update_hardware(0xFFFFFFFFu, data.data(), length), expected) << "length " << length;
    }
    // Misaligned start.
    EXPECT_EQ(crc32c(data.data() + 3, length), crc32c_bitwise(data.data() + 3, length));
  }
  // Incremental updates in arbitrary pieces give the one-shot value.
  for (int trial = 0; trial < 20; ++trial) {
    Crc32c crc;
    size_t position = 0;
    for (uint64_t piece = 0; position < data.size(); ++piece) {
      size_t length = std::min(data.size() - position, size_t(uniform_at(seed, trial, piece) * 300));
      crc.update(data.data() + position, length);
      position += length;
    }
    EXPECT_EQ(crc.value(), crc32c_bitwise(data.data(), data.size())) << "seed=" << seed;
  }
}

TEST(Crc32c, OfFileMatchesInMemoryAndNamesAMissingFile) {
  ScratchDirectory scratch;
  std::vector<unsigned char> data = random_bytes(100000, test_seed());
  std::ofstream(scratch.file("blob"), std::ios::binary).write(reinterpret_cast<const char*>(data.data()), data.size());
  int64_t size = 0;
  EXPECT_EQ(crc32c_of_file(scratch.file("blob"), &size), crc32c_bitwise(data.data(), data.size()));
  EXPECT_EQ(size, 100000);
  try {
    crc32c_of_file(scratch.file("missing"));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("missing"), std::string::npos) << error.what();
  }
}

TEST(Crc32c, FormatsAndParsesHex) {
  EXPECT_EQ(format_crc32c(0xE3069283u), "0xe3069283");
  EXPECT_EQ(parse_crc32c("0xe3069283", "x"), 0xE3069283u);
  EXPECT_EQ(parse_crc32c("0X0000ABCD", "x"), 0xABCDu);
  for (const char* bad : {"", "0x", "e3069283", "0xe306928", "0xe30692833", "0xg3069283", "1xe3069283"})
    EXPECT_THROW(parse_crc32c(bad, "manifest"), Error) << bad;
}

}  // namespace
}  // namespace lathe
