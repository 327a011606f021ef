// The wgmma descriptors against the tiles' layout, on every machine: for each operand the
// tensor-core attention forward builds (Q and K as K-major operands, V as the MN-major one), every
// element the descriptor addresses by the PTX ISA's canonical layout is the element the tile's
// writers stored there. A wrong stride, panel offset or depth step fails here, not on a GPU.
#include "lathe/device/wgmma_layout.h"

#include <gtest/gtest.h>

#include <set>

namespace lathe::wgmma {
namespace {

constexpr uint32_t kTile = 3 * kAtomBytes;  // any 1024-byte aligned shared address

TEST(WgmmaLayout, SwizzleKeepsEachRowsChunksInItsRowAndSpreadsAChunkColumnOverEightBankGroups) {
  for (uint32_t row = 0; row < 8; ++row) {
    std::set<uint32_t> chunks;
    for (uint32_t chunk = 0; chunk < 8; ++chunk) {
      const uint32_t address = swizzle_128(row * kRowBytes + chunk * 16);
      EXPECT_EQ(address / kRowBytes, row);
      chunks.insert(address % kRowBytes / 16);
    }
    EXPECT_EQ(chunks.size(), 8u);
  }
  std::set<uint32_t> column_zero;
  for (uint32_t row = 0; row < 8; ++row) column_zero.insert(swizzle_128(row * kRowBytes) % kRowBytes / 16);
  EXPECT_EQ(column_zero.size(), 8u);
}

TEST(WgmmaLayout, TileOffsetsAreADistinctPlaceForEveryElement) {
  const int rows = 64, columns = 128;
  std::set<uint32_t> offsets;
  for (int row = 0; row < rows; ++row)
    for (int column = 0; column < columns; ++column) {
      const uint32_t offset = tile_offset(rows, row, column);
      EXPECT_EQ(offset % 2, 0u);
      EXPECT_LT(offset, static_cast<uint32_t>(rows * columns * 2));
      offsets.insert(offset);
    }
  EXPECT_EQ(offsets.size(), static_cast<size_t>(rows * columns));
}

TEST(WgmmaLayout, DescriptorFieldsRoundTrip) {
  const uint64_t d = encode_descriptor(kTile + 96, 16384, kAtomBytes);
  EXPECT_EQ(descriptor_start(d), kTile + 96);
  EXPECT_EQ(descriptor_leading(d), 16384u);
  EXPECT_EQ(descriptor_stride(d), kAtomBytes);
  EXPECT_EQ(d >> 62, 1u);  // the 128-byte swizzle
}

// Q's halves (two warpgroups' A operands of 64 rows) and a K tile (the B operand, N = 128 keys) by
// depth steps, for head_dim 64 and 128 (one and two panels).
TEST(WgmmaLayout, KMajorDescriptorsAddressTheTilesRowsAtEachDepthStep) {
  struct Operand {
    int tile_rows, first_row, rows;
  };
  for (int depth : {64, 128})
    for (const Operand& operand : {Operand{128, 0, 64}, Operand{128, 64, 64}, Operand{128, 0, 128}, Operand{64, 0, 64}})
      for (int step = 0; step < depth / kStepDepth; ++step) {
        const uint64_t d = k_major_descriptor(kTile, operand.tile_rows, operand.first_row, step);
        for (int mn = 0; mn < operand.rows; ++mn)
          for (int k = 0; k < kStepDepth; ++k)
            ASSERT_EQ(k_major_address(d, mn, k),
                      kTile + tile_offset(operand.tile_rows, operand.first_row + mn, step * kStepDepth + k))
                << "depth " << depth << " tile rows " << operand.tile_rows << " first row " << operand.first_row
                << " step " << step << " mn " << mn << " k " << k;
      }
}

// V ([key][column], 128 keys) as the B operand of O += P V: N = head_dim columns, K = 16 keys.
TEST(WgmmaLayout, MnMajorDescriptorsAddressTheTilesColumnsAtEachDepthStep) {
  for (int columns : {64, 128})
    for (int rows : {64, 128})
      for (int step = 0; step < rows / kStepDepth; ++step) {
        const uint64_t d = mn_major_descriptor(kTile, rows, step);
        for (int mn = 0; mn < columns; ++mn)
          for (int k = 0; k < kStepDepth; ++k)
            ASSERT_EQ(mn_major_address(d, mn, k), kTile + tile_offset(rows, step * kStepDepth + k, mn))
                << "columns " << columns << " rows " << rows << " step " << step << " mn " << mn << " k " << k;
      }
}

}  // namespace
}  // namespace lathe::wgmma
