// Shared-memory tiles for Hopper's warpgroup matrix multiply (`wgmma.mma_async`, sm_90a) and the
// 64-bit descriptors that tell the tensor cores how to read them. Host and device code alike: the
// kernels (ops/flash_attention/flash_attention_cuda_wgmma_sm90a.cu) build descriptors with these
// functions, and wgmma_layout_test.cc checks on every machine that each descriptor, read the way
// the PTX ISA's "canonical layouts" say the hardware reads it, addresses exactly the element the
// tile's writers put there. (What no test here can check is the hardware itself: the first device
// check that runs the kernel does.)
//
// The tile: bf16, `rows` rows (a multiple of 8) by a multiple of 64 columns, stored as column
// panels of 64 ([column / 64][rows][64]: each row of a panel is 128 bytes), with the 128-byte
// swizzle: within each 8-row, 1024-byte atom the 16-byte chunk c of row r is stored at chunk
// c ^ (r % 8), so the 8 rows of one chunk column fall in 8 different bank groups. Tiles start on a
// 1024-byte boundary (the descriptor's base offset is then 0).
//
// Both operands of a product S = A B^T where A (M x K) and B (N x K) are row-major tiles with K
// along the row are "K-major"; a B whose rows run along K (O = P V with V stored [key][column])
// is "MN-major" (the instruction's imm-trans-b = 1). One descriptor covers one instruction's
// operand: 64 (A) or N (B) rows by K = 16, so a product over depth K takes K / 16 descriptors.
#pragma once

#include <cstdint>

#include "lathe/core/host_device.h"

namespace lathe::wgmma {

constexpr uint32_t kRowBytes = 128;    // one row of a 64-column bf16 panel, the swizzle's width
constexpr uint32_t kAtomBytes = 1024;  // 8 rows of a panel: one swizzle atom
constexpr int kPanelColumns = 64;
constexpr int kStepDepth = 16;  // K of one bf16 wgmma instruction

// The 128-byte swizzle of a shared-memory byte address (CuTe's Swizzle<3, 4, 3>): address bits 4-6
// (the 16-byte chunk within a 128-byte row) XOR bits 7-9 (the row within a 1024-byte atom).
LATHE_HOST_DEVICE constexpr uint32_t swizzle_128(uint32_t address) { return address ^ (((address >> 7) & 7u) << 4); }

// Byte offset from the tile's start of element (row, column) in a tile of `rows` rows.
LATHE_HOST_DEVICE constexpr uint32_t tile_offset(int rows, int row, int column) {
  const uint32_t panel = static_cast<uint32_t>(column / kPanelColumns), within = column % kPanelColumns;
  return swizzle_128(panel * static_cast<uint32_t>(rows) * kRowBytes + static_cast<uint32_t>(row) * kRowBytes +
                     within * 2u);
}

// A descriptor (PTX ISA "matrix descriptor format"): start address, leading and stride byte
// offsets, each encoded as (x & 0x3FFFF) >> 4 in bits 0-13, 16-29 and 32-45; base offset 0 (bits
// 49-51); swizzle mode 1 = 128 bytes (bits 62-63).
LATHE_HOST_DEVICE constexpr uint64_t encode_descriptor(uint32_t start, uint32_t leading_bytes, uint32_t stride_bytes) {
  auto field = [](uint32_t bytes) { return static_cast<uint64_t>((bytes & 0x3FFFFu) >> 4); };
  return field(start) | field(leading_bytes) << 16 | field(stride_bytes) << 32 | uint64_t{1} << 62;
}
LATHE_HOST_DEVICE constexpr uint32_t descriptor_start(uint64_t d) { return static_cast<uint32_t>(d & 0x3FFF) << 4; }
LATHE_HOST_DEVICE constexpr uint32_t descriptor_leading(uint64_t d) {
  return static_cast<uint32_t>((d >> 16) & 0x3FFF) << 4;
}
LATHE_HOST_DEVICE constexpr uint32_t descriptor_stride(uint64_t d) {
  return static_cast<uint32_t>((d >> 32) & 0x3FFF) << 4;
}

// The K-major operand of depth step `step` (columns 16 step .. + 15) from row `first_row` of a
// tile of `rows` rows at shared address `tile`: the step's 32 bytes within its panel row (the
// swizzle is applied by the hardware to the full address, so a step inside the 128-byte row is a
// plain offset), 8-row groups 1024 bytes apart (the stride byte offset; the leading one is unused
// with a swizzle, "assumed 1").
LATHE_HOST_DEVICE constexpr uint64_t k_major_descriptor(uint32_t tile, int rows, int first_row, int step) {
  const uint32_t column = static_cast<uint32_t>(step * kStepDepth);
  const uint32_t start = tile + column / kPanelColumns * static_cast<uint32_t>(rows) * kRowBytes +
                         static_cast<uint32_t>(first_row) * kRowBytes + column % kPanelColumns * 2u;
  return encode_descriptor(start, 16, kAtomBytes);
}

// The MN-major B operand of depth step `step` (tile rows 16 step .. + 15, all columns): 8-row groups
// 1024 bytes apart (the stride byte offset), 64-column panels rows * 128 bytes apart (the leading
// byte offset).
LATHE_HOST_DEVICE constexpr uint64_t mn_major_descriptor(uint32_t tile, int rows, int step) {
  const uint32_t start = tile + static_cast<uint32_t>(step * kStepDepth) * kRowBytes;
  return encode_descriptor(start, static_cast<uint32_t>(rows) * kRowBytes, kAtomBytes);
}

// What the tensor cores read for element (mn, k) of an operand (mn: the M or N index, k < 16),
// per the PTX ISA's canonical layouts for the 128-byte swizzle with 2-byte elements (T = 8):
// K-major ((8, m), (T, 2)) : ((8T, SBO), (1, T)); MN-major ((T, 8, m), (8, 2)) : ((1, T, LBO), (8T,
// SBO)), in elements except SBO and LBO (bytes), then swizzled. For tests: the kernels never call them.
LATHE_HOST_DEVICE constexpr uint32_t k_major_address(uint64_t d, int mn, int k) {
  const uint32_t elements = static_cast<uint32_t>(64 * (mn % 8) + k % 8 + 8 * (k / 8));
  return swizzle_128(descriptor_start(d) + static_cast<uint32_t>(mn / 8) * descriptor_stride(d) + 2u * elements);
}
LATHE_HOST_DEVICE constexpr uint32_t mn_major_address(uint64_t d, int mn, int k) {
  const uint32_t elements = static_cast<uint32_t>(mn % 8 + 8 * ((mn / 8) % 8) + 64 * (k % 8));
  return swizzle_128(descriptor_start(d) + static_cast<uint32_t>(mn / 64) * descriptor_leading(d) +
                     static_cast<uint32_t>(k / 8) * descriptor_stride(d) + 2u * elements);
}

}  // namespace lathe::wgmma
