// The AMX Path of matmul_gemm.h's blocked GEMM, shared by the tile kernels of matmul and
// grouped_matmul (files named *_amx_kernels.cc, compiled twice by lathe_add_amx_kernels: on the
// real tile instructions and on core/amx_tiles.h's scalar emulation of them). Include after
// lathe/core/simd.h and lathe/core/amx_tiles.h.
//
// AmxPath supplies the packing and a 32 x 32 register tile; gemm_range's L2/L3 blocking (mc x kc
// blocks of A, kc x nc blocks of B, the per-thread split, the epilogue) is shared with the vector
// paths:
//   A panel (32 rows): row-major bf16, each row kc rounded up to 32 (zero padded), so a 16-row A
//     tile is one strided tile load (16 rows x 32 bf16 = 64 bytes each);
//   B panel (32 columns): the VNNI layout tdpbf16ps reads, pairs of depth steps per column,
//     element (column j, depth 2q + h) at [q][j][h] (matmul_packing.h's pack_bf16_pairs), depth
//     zero padded to a multiple of 32, so a B tile is 16 pair rows x 16 columns (128-byte stride);
//   the tile: accumulators C0-C3 (a 2 x 2 block of 16 x 16 f32 tiles), A tiles 4-5, B tiles 6-7;
//     per 32 depth steps 4 tile loads and 4 tdpbf16ps. A whole 32 x 32 tile of C starts from C
//     itself after the first K slice and is tile-stored back; the last slice's bias or activation,
//     and C's partial edge tiles, go through a 4 KiB buffer into the vector epilogue (store_tile).
// A thread configures the tiles before its share and releases them after (begin_thread /
// end_thread, run by ThreadSetup). Every element of C is summed in the same order whatever the
// thread split: bitwise reproducible for any thread count.
#pragma once

#include <cstdint>
#include <cstring>

#include "lathe/ops/matmul/matmul_gemm_run.h"

namespace lathe::LATHE_ISA_NS::gemm {

using amx_tiles::Tiles;

inline constexpr int kTileDepth = 32;  // bf16 depth steps per tile (64 bytes)

// Rows [row0, row0 + rows) x depth [col0, col0 + depth) of x[t] (bf16) into panels of `width`
// rows: panel rows are contiguous and `stride` = depth rounded up to kTileDepth long, zero padded
// (padding rows too).
inline void pack_amx_rows(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth,
                          int width, uint16_t* __restrict dest) {
  const int64_t stride = round_up(depth, kTileDepth), rs = x.row_stride;
  const uint16_t* base = static_cast<const uint16_t*>(x.data) + t * x.batch_stride;
  for (int64_t panel_row = 0; panel_row < rows; panel_row += width) {
    const int64_t valid = min64(width, rows - panel_row);
    uint16_t* out = dest + panel_row * stride;
    if (!x.transposed) {
      for (int64_t r = 0; r < valid; ++r)
        std::memcpy(out + r * stride, base + (row0 + panel_row + r) * rs + col0, 2 * depth);
    } else {  // storage row p holds (i, p) for consecutive i
      transpose_bf16_rows(base + col0 * rs + row0 + panel_row, rs, valid, depth, out, stride);
    }
    for (int64_t r = 0; r < valid; ++r) std::memset(out + r * stride + depth, 0, 2 * (stride - depth));
    if (valid < width) std::memset(out + valid * stride, 0, 2 * (width - valid) * stride);
  }
}

// VNNI panels of `width` columns: pack_bf16_pairs, pairs zero padded to stride / 2. Without depth
// padding its panels are these, packed in one call (a transposed operand in groups of panels).
inline void pack_amx_pairs(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth,
                           int width, uint16_t* __restrict dest) {
  const int64_t stride = round_up(depth, kTileDepth), pairs = (depth + 1) / 2;
  if (stride == 2 * pairs) return pack_bf16_pairs(x, t, row0, rows, col0, depth, width, dest);
  for (int64_t panel_row = 0; panel_row < rows; panel_row += width) {
    uint16_t* out = dest + panel_row * stride;
    pack_bf16_pairs(x, t, row0 + panel_row, min64(width, rows - panel_row), col0, depth, width, out);
    std::memset(out + pairs * 2 * width, 0, 2 * (stride / 2 - pairs) * 2 * width);
  }
}

struct AmxPath {
  static constexpr int kMR = 32, kNR = 32;
  using Packed = uint16_t;
  static int64_t packed_depth(int64_t depth) { return round_up(depth, kTileDepth); }
  static void pack_a(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth, int width,
                     Packed* dest) {
    pack_amx_rows(x, t, row0, rows, col0, depth, width, dest);
  }
  static void pack_b(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth, int width,
                     Packed* dest) {
    pack_amx_pairs(x, t, row0, rows, col0, depth, width, dest);
  }
  static void begin_thread() { Tiles::configure(16, 64); }
  static void end_thread() { Tiles::release(); }

  // depth: the packed depth (a multiple of 32); a: (32, depth) rows; b: (depth / 2, 32, 2) pairs.
  // A whole 32 x 32 tile of C keeps its running sum in the accumulator tiles: a later K slice (or
  // accumulate) loads C into them instead of zeroing, and the sums go straight back to C with tile
  // stores unless the last slice adds a bias or an activation. Only those tiles, and partial tiles
  // at C's edges, pass through the vector epilogue. Which tiles are whole depends on C's shape
  // alone (threads split C in whole tiles), so any thread count still gives the same bits.
  static void tile(int64_t depth, const Packed* a, const Packed* b, float* c, int64_t ldc, int64_t rows, int64_t cols,
                   const Epilogue& e) {
    tile_rows(depth, a, depth, b, c, ldc, rows, cols, e);
  }

  // tile() on A rows lda elements apart (a packed panel: lda = depth).
  static void tile_rows(int64_t depth, const Packed* a, int64_t lda, const Packed* b, float* c, int64_t ldc,
                        int64_t rows, int64_t cols, const Epilogue& e) {
    const bool whole = rows == kMR && cols == kNR;
    // C's 16 x 16 quarters (the accumulator tiles C0-C3) and the bytes from one C row to the next.
    float* const c_quarter[4] = {c, c + 16, c + 16 * ldc, c + 16 * ldc + 16};
    const int64_t c_stride = 4 * ldc;
    if (whole && e.load_c) {
      Tiles::load<0>(c_quarter[0], c_stride), Tiles::load<1>(c_quarter[1], c_stride);
      Tiles::load<2>(c_quarter[2], c_stride), Tiles::load<3>(c_quarter[3], c_stride);
    } else {
      Tiles::zero<0>(), Tiles::zero<1>(), Tiles::zero<2>(), Tiles::zero<3>();
    }
    const int64_t a_stride = 2 * lda;  // bytes from one A row to the next
    for (int64_t p = 0; p < depth; p += kTileDepth) {
      Tiles::load<4>(a + p, a_stride);
      Tiles::load<5>(a + 16 * lda + p, a_stride);
      Tiles::load<6>(b + p * kNR, 4 * kNR);       // pair rows p/2 .. p/2 + 15, columns 0-15
      Tiles::load<7>(b + p * kNR + 32, 4 * kNR);  // columns 16-31
      Tiles::dpbf16ps<0, 4, 6>();
      Tiles::dpbf16ps<1, 4, 7>();
      Tiles::dpbf16ps<2, 5, 6>();
      Tiles::dpbf16ps<3, 5, 7>();
    }
    const bool vector_epilogue = !whole || (e.finalize && (e.bias || e.activation != Activation::none));
    if (!vector_epilogue) {
      Tiles::store<0>(c_quarter[0], c_stride), Tiles::store<1>(c_quarter[1], c_stride);
      Tiles::store<2>(c_quarter[2], c_stride), Tiles::store<3>(c_quarter[3], c_stride);
      return;
    }
    alignas(64) float sums[kMR * kNR];  // (32, 32)
    Tiles::store<0>(sums, 4 * kNR);
    Tiles::store<1>(sums + 16, 4 * kNR);
    Tiles::store<2>(sums + 16 * kNR, 4 * kNR);
    Tiles::store<3>(sums + 16 * kNR + 16, 4 * kNR);
    Epilogue rest = e;
    rest.load_c = e.load_c && !whole;  // a whole tile's sums already hold C
    constexpr int NV = kNR / W;
    for (int64_t r = 0; r < rows; ++r) {  // a row at a time: 2 vectors live, not 64
      VecF acc[1][NV];
      for (int v = 0; v < NV; ++v) acc[0][v] = VecF::load(sums + r * kNR + v * W);
      store_tile<1, NV>(acc, c + r * ldc, ldc, 1, cols, rest);
    }
  }
};

// AmxPath with a row-major A read where it lies: a tile load takes 16 rows at any stride, so A
// needs no packing where a K slice is a whole number of tile depths (a deeper tile load would read
// past the slice, or past A's last column); other slices, transposed A and a partial last row
// tile are packed as in AmxPath. Packing A cost a copy of every A block for each nc-wide column
// block: at 4096^3 (nc 1024) A four times, ~5 of the ~7 ms of the kernel's vector work on Zen 4
// (tiles compiled out; docs/perf.md). The cost it may add, unmeasured: a tile's 16 rows are
// 2 * K bytes apart, one L1 set when that is a multiple of 4 KB, where packed rows are 2 * kc.
// Chosen by MatmulCpuConfig::microkernel = 1.
struct AmxInPlaceAPath : AmxPath {
  static bool reads_a_in_place(const Operand& a, int64_t kb) { return a.bf16 && !a.transposed && kb % kTileDepth == 0; }
  // Rows [row, row + 32) x depth [p0, p0 + depth) of A[t], depth = kb.
  static void tile_a_in_place(int64_t depth, const Operand& a, int64_t t, int64_t row, int64_t p0, const Packed* b,
                              float* c, int64_t ldc, int64_t cols, const Epilogue& e) {
    const uint16_t* base = static_cast<const uint16_t*>(a.data) + t * a.batch_stride + row * a.row_stride + p0;
    tile_rows(depth, base, a.row_stride, b, c, ldc, kMR, cols, e);
  }
};

}  // namespace lathe::LATHE_ISA_NS::gemm
