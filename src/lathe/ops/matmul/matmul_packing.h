// Packing for the blocked GEMM of matmul_gemm.h: an Operand (a logical matrix over strided,
// possibly transposed, f32 or bf16 storage) copied into the micro-panels a register tile reads,
// edges padded with zeros. pack_f32 writes f32 panels (widening bf16); pack_bf16_pairs writes the
// pair-interleaved bf16 panels of the vdpbf16ps path (and AMX's B); transpose_bf16_rows the
// row-major panels of AMX's A where A is transposed. All move whole 8 x 8 blocks through
// registers where they can. Only for kernel sources compiled per ISA (lathe_add_isa_kernels).
#pragma once

#include <cstdint>
#include <cstring>

#include "lathe/core/simd.h"

namespace lathe::LATHE_ISA_NS::gemm {

using simd::VecF;
constexpr int W = VecF::width;

inline float bf16_bits_to_float(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

// A logical (rows x cols) matrix over physical storage with unit inner stride: element (i, p)
// of batch entry t is at data[t * batch_stride + (transposed ? p * row_stride + i : i * row_stride + p)].
struct Operand {
  const void* data = nullptr;
  bool bf16 = false;
  int64_t batch_stride = 0, row_stride = 0;
  bool transposed = false;
};

constexpr int kMaxPanelWidth = 64;  // the widest tile dimension (6x64)
constexpr int64_t kPackPrefetchRows = 8;  // transposed packing: storage rows prefetched ahead
constexpr int64_t kPackPrefetchFarRows = 24;  // transposed f32 packing: storage rows requested into L2
constexpr int64_t kPackGroupFloats = 128;  // transposed packing: the width of a group of panels

#if LATHE_KERNEL_ISA >= 1
// 8 bf16 values widened to floats (exact).
inline __m256 load8_bf16(const uint16_t* p) {
  __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

inline int64_t min_index(int64_t x, int64_t y) { return x < y ? x : y; }

// Stores the first `lanes` (4 to 7) of v's 8 floats at out: one 128-bit store, then 64- and
// 32-bit ones. Not vmaskmovps: a masked store is microcoded on AMD Zen, and packing the 6-row
// AVX2 A panels with it (one per depth step) was 12% of the GEMM's samples in a 4096 x 256 x 256
// product on Zen 3, 7% with these stores (docs/perf.md).
inline void store_first_lanes(float* out, __m256 v, int64_t lanes) {
  _mm_storeu_ps(out, _mm256_castps256_ps128(v));
  __m128 high = _mm256_extractf128_ps(v, 1);
  float* rest = out + 4;
  if (lanes - 4 >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(rest), high);
    high = _mm_movehl_ps(high, high);
    rest += 2;
  }
  if ((lanes - 4) & 1) _mm_store_ss(rest, high);
}

// rows[j] holds row j of an 8 x 8 block; afterwards rows[j] holds its column j.
inline void transpose8x8(__m256 (&rows)[8]) {
  __m256 t[8], s[8];
  for (int j = 0; j < 4; ++j) {
    t[2 * j] = _mm256_unpacklo_ps(rows[2 * j], rows[2 * j + 1]);
    t[2 * j + 1] = _mm256_unpackhi_ps(rows[2 * j], rows[2 * j + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0-3 (h = 0) and 4-7 (h = 1)
    __m256 lo_a = t[4 * h], hi_a = t[4 * h + 1], lo_b = t[4 * h + 2], hi_b = t[4 * h + 3];
    s[4 * h + 0] = _mm256_shuffle_ps(lo_a, lo_b, _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * h + 1] = _mm256_shuffle_ps(lo_a, lo_b, _MM_SHUFFLE(3, 2, 3, 2));
    s[4 * h + 2] = _mm256_shuffle_ps(hi_a, hi_b, _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * h + 3] = _mm256_shuffle_ps(hi_a, hi_b, _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    rows[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
    rows[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
  }
}
#endif

// Packs rows [row0, row0 + rows) x depth columns [col0, col0 + depth) of x[t] into panels of
// `width` rows: dest[panel][p][r], zero-padded to whole panels.
inline void pack_f32(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth, int width,
                     float* __restrict dest) {
  const int64_t rs = x.row_stride;
  const float* base_f32 = static_cast<const float*>(x.data) + t * x.batch_stride;
  const uint16_t* base_bf16 = static_cast<const uint16_t*>(x.data) + t * x.batch_stride;
  if (x.transposed) {  // row p of storage holds element (i, p) for consecutive i
    // Panels in groups about kPackGroupFloats wide (four of the AVX-512 tile's 32-wide panels),
    // each group storage row by storage row: one contiguous 512-byte read per row and a few write
    // streams. Row by row across all panels (every panel written at each depth step, panels
    // depth * width floats apart: 64 KB, one L1 set) copied at 11-31 GB/s in a stand-alone
    // measurement on Zen 4 where groups of four panels reached 23-60 GB/s (groups of 8 or 16
    // panels and blocks of 8 or 16 depth steps were slower); panel by panel reads one or two lines
    // from each of `depth` rows, a page apart, which the prefetchers do not follow. Consecutive
    // storage rows are still 1-4 KB apart in a weight gradient's dy^T, a new page each, so the
    // group's part of the row kPackPrefetchRows ahead is prefetched into L1 (the copy's load stall
    // fell from ~5% to ~1% of a 1024 x 256 x 4096 product's samples on Zen 3; 16 rows ahead was no
    // better). Past L1's few miss buffers (8 rows of a 126-float group are 64-72 lines) the same
    // part of the row kPackPrefetchFarRows ahead is requested into L2 as well: the packing of A
    // and B waited on L3 without it, ~10% of a 512 x 512 x 4096 weight gradient's samples on Zen 4
    // where the tile loop ran at the FMA peak; with it that product ran 0.90x -> 0.93x oneDNN on
    // one thread (docs/perf.md, "seventh session of 2026-12-07"). Not in the bf16 pair packing,
    // where it measured nothing (half the bytes a row).
    const int64_t group = width * (kPackGroupFloats / width > 1 ? kPackGroupFloats / width : 1);
#if LATHE_KERNEL_ISA >= 1
    const int64_t element_bytes = x.bf16 ? 2 : 4;
    const char* base_bytes = static_cast<const char*>(x.data) + t * x.batch_stride * element_bytes;
#endif
    for (int64_t group_row = 0; group_row < rows; group_row += group) {
      const int64_t group_end = rows - group_row < group ? rows : group_row + group;
      for (int64_t p = 0; p < depth; ++p) {
        const int64_t offset = (col0 + p) * rs + row0;
#if LATHE_KERNEL_ISA >= 1
        if (p + kPackPrefetchRows < depth) {
          const char* ahead = base_bytes + (offset + kPackPrefetchRows * rs + group_row) * element_bytes;
          for (int64_t byte = 0; byte < (group_end - group_row) * element_bytes + 63; byte += 64)
            simd::prefetch_read(ahead + byte);
        }
        if (p + kPackPrefetchFarRows < depth) {
          const char* far = base_bytes + (offset + kPackPrefetchFarRows * rs + group_row) * element_bytes;
          for (int64_t byte = 0; byte < (group_end - group_row) * element_bytes + 63; byte += 64)
            simd::prefetch_read_l2(far + byte);
        }
#endif
        for (int64_t panel_row = group_row; panel_row < group_end; panel_row += width) {
          int64_t valid = rows - panel_row < width ? rows - panel_row : width;
          float* o = dest + panel_row * depth + p * width;
#if LATHE_KERNEL_ISA >= 1
          // A whole panel row is `width` contiguous values: vector copies (a library memmove call
          // per panel row cost more than the copy; it dominated packing a streamed weight). Widths
          // that are not a multiple of 8 (a 14-row tile) end with a copy overlapping the one before.
          if (valid == width && width >= 8) {
            for (int64_t step = 0; step < width; step += 8) {
              const int64_t r = min_index(step, width - 8);
              _mm256_storeu_ps(o + r, x.bf16 ? load8_bf16(base_bf16 + offset + panel_row + r)
                                             : _mm256_loadu_ps(base_f32 + offset + panel_row + r));
            }
            continue;
          }
          // Narrower panels (the AVX2 tiles' 4 and 6 rows): one 8-float load where the block has 8
          // more rows (no read past it), the first `width` lanes stored.
          if (valid == width && width >= 4 && panel_row + 8 <= rows) {
            store_first_lanes(o, x.bf16 ? load8_bf16(base_bf16 + offset + panel_row)
                                        : _mm256_loadu_ps(base_f32 + offset + panel_row),
                              width);
            continue;
          }
#endif
          if (x.bf16)
            for (int64_t r = 0; r < valid; ++r) o[r] = bf16_bits_to_float(base_bf16[offset + panel_row + r]);
          else
            for (int64_t r = 0; r < valid; ++r) o[r] = base_f32[offset + panel_row + r];
          for (int64_t r = valid; r < width; ++r) o[r] = 0.0f;
        }
      }
    }
    return;
  }
  for (int64_t panel_row = 0; panel_row < rows; panel_row += width) {
    int64_t valid = rows - panel_row < width ? rows - panel_row : width;
    float* out = dest + panel_row * depth;
    int64_t i0 = row0 + panel_row;
    {  // row i of storage is contiguous in p: read `valid` rows side by side, write in order
      int64_t offsets[kMaxPanelWidth];
      for (int64_t r = 0; r < valid; ++r) offsets[r] = (i0 + r) * rs + col0;
      int64_t p = 0;
#if LATHE_KERNEL_ISA >= 1
      // Whole panels in 8 x 8 blocks transposed in registers: each row is read with vector loads
      // (a B operand streamed from memory, e.g. an expert's weight, is read at full line rate
      // instead of one float per row and depth step). A width that is not a multiple of 8 (the
      // 14-row AVX-512 tile) ends with a block overlapping the one before (the same values are
      // stored twice); a width below 8 (the AVX2 tiles' 4 and 6 rows) loads its last row again
      // for the missing ones and stores `width` lanes.
      if (valid == width && width >= 4)
        for (; p + 8 <= depth; p += 8)
          for (int64_t step = 0; step < width; step += 8) {
            const int64_t r = width >= 8 ? min_index(step, width - 8) : 0;
            __m256 rows[8];
            for (int j = 0; j < 8; ++j) {
              const int64_t row = offsets[r + min_index(j, width - 1 - r)];
              rows[j] = x.bf16 ? load8_bf16(base_bf16 + row + p) : _mm256_loadu_ps(base_f32 + row + p);
            }
            transpose8x8(rows);
            if (width >= 8)
              for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + (p + j) * width + r, rows[j]);
            else
              for (int j = 0; j < 8; ++j) store_first_lanes(out + (p + j) * width, rows[j], width);
          }
#endif
      for (; p < depth; ++p) {
        float* o = out + p * width;
        if (x.bf16)
          for (int64_t r = 0; r < valid; ++r) o[r] = bf16_bits_to_float(base_bf16[offsets[r] + p]);
        else
          for (int64_t r = 0; r < valid; ++r) o[r] = base_f32[offsets[r] + p];
        for (int64_t r = valid; r < width; ++r) o[r] = 0.0f;
      }
    }
  }
}

// One pair row of a panel of a transposed bf16 operand: o[2r + h] = element (i0 + r, 2q + h) for
// r < valid (storage row col0 + 2q + h, column i0 + r), 0 for r in [valid, width) and for the
// missing odd half where depth is odd. pack_bf16_pairs' transposed case.
inline void pack_transposed_pair_row(const uint16_t* base, int64_t rs, int64_t i0, int64_t valid, int64_t col0,
                                     int64_t q, int64_t depth, int width, uint16_t* __restrict o) {
  const uint16_t* even = base + (col0 + 2 * q) * rs + i0;
  const uint16_t* odd = 2 * q + 1 < depth ? even + rs : nullptr;
  int64_t r = 0;
#if LATHE_KERNEL_ISA == 2
  // 16 rows at a time: both halves widened to 32 bits, the odd one shifted to the top.
  for (; r < width; r += 16) {
    const int64_t loaded = valid - r <= 0 ? 0 : valid - r < 16 ? valid - r : 16;
    const __mmask16 load_mask = static_cast<__mmask16>((1u << loaded) - 1);
    const __mmask16 store_mask = static_cast<__mmask16>(width - r >= 16 ? 0xffffu : (1u << (width - r)) - 1);
    const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(load_mask, even + r));
    const __m512i hi =
        odd ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(load_mask, odd + r)) : _mm512_setzero_si512();
    _mm512_mask_storeu_epi32(o + 2 * r, store_mask, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
  }
#endif
  for (; r < width; ++r) {
    o[2 * r] = r < valid ? even[r] : 0;
    o[2 * r + 1] = r < valid && odd ? odd[r] : 0;
  }
}

// pack_bf16_pairs of an operand whose storage rows p and p + 1 hold a pair's two halves for
// consecutive i.
inline void pack_transposed_bf16_pairs(const uint16_t* base, int64_t rs, int64_t row0, int64_t rows, int64_t col0,
                                       int64_t depth, int width, uint16_t* __restrict dest) {
  const int64_t pairs = (depth + 1) / 2;
  // Wide panels (B's: 32 or 64 columns) in groups about kPackGroupFloats wide, each group pair by
  // pair, with the group's part of the pair kPackPrefetchRows storage rows ahead prefetched:
  // pack_f32's transposed order, for its reason (panel by panel read 64 or 128 bytes from each of
  // `depth` rows, each a page or more from the last, which the prefetchers do not follow; the AMX
  // GEMM's vector work at 4096^3 fell 15-20%, docs/perf.md, eighth session of 2026-12-06). Narrow
  // panels (A's, MR rows wide) one at a time, unprefetched: grouped, a 256 x 256 x 4096 weight
  // gradient's A packing ran ~6% slower on Zen 4.
  const bool wide = width >= 16;
  const int64_t group = wide && kPackGroupFloats / width > 1 ? width * (kPackGroupFloats / width) : width;
  for (int64_t group_row = 0; group_row < rows; group_row += group) {
    const int64_t group_end = rows - group_row < group ? rows : group_row + group;
    for (int64_t q = 0; q < pairs; ++q) {
#if LATHE_KERNEL_ISA >= 1
      if (wide && 2 * q + 1 + kPackPrefetchRows < depth) {
        const uint16_t* ahead = base + (col0 + 2 * q + kPackPrefetchRows) * rs + row0 + group_row;
        for (int64_t byte = 0; byte < (group_end - group_row) * 2 + 63; byte += 64) {
          simd::prefetch_read(reinterpret_cast<const char*>(ahead) + byte);
          simd::prefetch_read(reinterpret_cast<const char*>(ahead + rs) + byte);
        }
      }
#endif
      for (int64_t panel_row = group_row; panel_row < group_end; panel_row += width)
        pack_transposed_pair_row(base, rs, row0 + panel_row, rows - panel_row < width ? rows - panel_row : width, col0,
                                 q, depth, width, dest + panel_row * pairs * 2 + q * width * 2);
    }
  }
}

// bf16 pairs: element (i, 2q + h) of a panel row sits at dest[q][r][h], so one 32-bit broadcast
// of A and one 512-bit load of B feed vdpbf16ps (16 columns x 2 depth steps). Odd depth is
// padded with a zero.
inline void pack_bf16_pairs(const Operand& x, int64_t t, int64_t row0, int64_t rows, int64_t col0, int64_t depth,
                            int width, uint16_t* __restrict dest) {
  const int64_t rs = x.row_stride, pairs = (depth + 1) / 2;
  const uint16_t* base = static_cast<const uint16_t*>(x.data) + t * x.batch_stride;
  if (x.transposed) return pack_transposed_bf16_pairs(base, rs, row0, rows, col0, depth, width, dest);
  // Storage row i holds its pairs contiguously: 32-bit units to transpose.
  for (int64_t panel_row = 0; panel_row < rows; panel_row += width) {
    int64_t valid = rows - panel_row < width ? rows - panel_row : width;
    uint16_t* out = dest + panel_row * pairs * 2;
    int64_t i0 = row0 + panel_row;
    uint32_t* out_pairs = reinterpret_cast<uint32_t*>(out);
    const int64_t whole_pairs = depth / 2;
    int64_t first_scalar = 0;
#if LATHE_KERNEL_ISA >= 1
    // Whole panels in 8 x 8 blocks of pairs transposed in registers, as pack_f32 does with
    // floats (bit moves only: shuffles never alter a lane). Was one 32-bit copy per pair.
    if (valid == width && width >= 4) {
      float* out_units = reinterpret_cast<float*>(out);
      for (; first_scalar + 8 <= whole_pairs; first_scalar += 8)
        for (int64_t step = 0; step < width; step += 8) {
          const int64_t r = width >= 8 ? min_index(step, width - 8) : 0;
          __m256 rows8[8];
          for (int j = 0; j < 8; ++j) {
            const uint16_t* src = base + (i0 + r + min_index(j, width - 1 - r)) * rs + col0 + 2 * first_scalar;
            rows8[j] = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
          }
          transpose8x8(rows8);
          float* o = out_units + first_scalar * width;
          if (width >= 8)
            for (int j = 0; j < 8; ++j) _mm256_storeu_ps(o + j * width + r, rows8[j]);
          else
            for (int j = 0; j < 8; ++j) store_first_lanes(o + j * width, rows8[j], width);
        }
    }
#endif
    for (int64_t r = 0; r < width; ++r) {
      uint32_t* o = out_pairs + r;
      if (r >= valid) {  // only where the vector blocks did not run
        for (int64_t q = 0; q < pairs; ++q) o[q * width] = 0;
        continue;
      }
      const uint16_t* src = base + (i0 + r) * rs + col0;
      for (int64_t q = first_scalar; q < whole_pairs; ++q) {
        uint32_t pair;
        std::memcpy(&pair, src + 2 * q, 4);
        o[q * width] = pair;
      }
      if (depth & 1) o[(pairs - 1) * width] = src[depth - 1];
    }
  }
}

// A transposed bf16 block into row-major rows: dest[r * dest_stride + p] = src[p * src_stride + r]
// for r < rows, p < depth (the AMX A panels of a transposed A, the weight gradients' x^T). Blocks
// of 16 depth steps x 8 rows go through registers: each pair of storage rows interleaved into
// 32-bit (depth 2q, 2q + 1) units, then transpose8x8 of those units; the 8-row blocks of one depth
// block follow each other, so its 16 storage lines are read from L1 after the first. Was one
// 16-bit load and store per element.
inline void transpose_bf16_rows(const uint16_t* src, int64_t src_stride, int64_t rows, int64_t depth,
                                uint16_t* __restrict dest, int64_t dest_stride) {
  int64_t vector_rows = 0, vector_depth = 0;
#if LATHE_KERNEL_ISA >= 1
  vector_rows = rows / 8 * 8, vector_depth = depth / 16 * 16;
  for (int64_t p = 0; p < vector_depth; p += 16)
    for (int64_t r = 0; r < vector_rows; r += 8) {
      __m256 units[8];  // units[q]: rows r .. r + 7 of depth steps p + 2q, p + 2q + 1
      for (int q = 0; q < 8; ++q) {
        const uint16_t* even = src + (p + 2 * q) * src_stride + r;
        const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even));
        const __m128i o = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even + src_stride));
        units[q] = _mm256_castsi256_ps(_mm256_set_m128i(_mm_unpackhi_epi16(e, o), _mm_unpacklo_epi16(e, o)));
      }
      transpose8x8(units);  // units[k]: row r + k, depth steps p .. p + 15
      for (int k = 0; k < 8; ++k)
        _mm256_storeu_ps(reinterpret_cast<float*>(dest + (r + k) * dest_stride + p), units[k]);
    }
#endif
  for (int64_t p = 0; p < depth; ++p) {  // what the blocks left: the last rows, then the last depth steps
    const uint16_t* row = src + p * src_stride;
    for (int64_t r = p < vector_depth ? vector_rows : 0; r < rows; ++r) dest[r * dest_stride + p] = row[r];
  }
}

}  // namespace lathe::LATHE_ISA_NS::gemm
