// CRC-32C against published check values and a bit-at-a-time reference.
#include "lathe/io/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "test_seed.h"

namespace lathe {
namespace {

// The definition itself, one bit at a time, independent of the slicing tables.
uint32_t crc32c_bitwise(const std::vector<unsigned char>& data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
  }
  return ~crc;
}

TEST(Crc32c, PublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff), ascending(32), descending(32);
  for (int i = 0; i < 32; ++i)
    ascending[i] = static_cast<unsigned char>(i), descending[i] = static_cast<unsigned char>(31 - i);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c(descending.data(), descending.size()), 0x113FDB5Cu);
}

TEST(Crc32c, MatchesBitwiseReferenceAtEveryLengthAndSplit) {
  std::mt19937_64 random(test_seed());
  std::vector<unsigned char> data(300);
  for (auto& byte : data) byte = static_cast<unsigned char>(random());
  for (size_t size = 0; size <= data.size(); size += (size < 40 ? 1 : 37)) {
    std::vector<unsigned char> prefix(data.begin(), data.begin() + size);
    uint32_t expected = crc32c_bitwise(prefix);
    ASSERT_EQ(crc32c(data.data(), size), expected) << "size " << size << " seed " << test_seed();
    size_t split = size ? random() % size : 0;  // chaining pieces gives the whole buffer's CRC
    ASSERT_EQ(crc32c(data.data() + split, size - split, crc32c(data.data(), split)), expected)
        << "size " << size << " split " << split << " seed " << test_seed();
  }
}

TEST(Crc32c, MaskRoundTripsAndMatchesTheTfRecordFormula) {
  for (uint32_t crc : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x80000000u}) {
    uint32_t masked = mask_crc32c(crc);
    EXPECT_EQ(masked, static_cast<uint32_t>(((crc >> 15) | (crc << 17)) + 0xa282ead8u));
    EXPECT_EQ(unmask_crc32c(masked), crc);
  }
  EXPECT_EQ(mask_crc32c(0), 0xa282ead8u);
}

}  // namespace
}  // namespace lathe
