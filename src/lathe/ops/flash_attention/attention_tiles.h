// Register-blocked tile products and element helpers shared by the attention kernels
// (flash_attention_kernels.cc, mla_decode_kernels.cc). Included only by kernel files compiled once per
// ISA (lathe_add_isa_kernels): everything lives in namespace lathe::LATHE_ISA_NS::attention_tiles.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "lathe/core/aligned_buffer.h"
#include "lathe/core/error.h"
#include "lathe/core/simd.h"

namespace lathe::LATHE_ISA_NS::attention_tiles {

using simd::VecF;
constexpr int W = VecF::width;
constexpr int kRows = 6;                     // rows of accumulators in a microkernel
constexpr int kMaxVectors = W == 8 ? 2 : 4;  // vectors of accumulators per row (avx2 has 16 registers)
constexpr float kMaskedScore = -1e30f;       // exp(kMaskedScore - finite max) == 0

inline int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }
// Pairs cheap and expensive blocks (causal) so contiguous static chunks get balanced work.
inline int64_t zigzag(int64_t t, int64_t n) { return t % 2 == 0 ? t / 2 : n - 1 - t / 2; }

// Brings `rows` rows of `row_bytes` bytes, `stride_bytes` apart, towards L1 (for_write: about to be
// written). The attention kernels read Q and dO rows 1 KB or more apart and write dK/dV/O rows
// likewise: a stride across pages the hardware prefetchers do not follow, and tensors larger than
// the caches, so a block's first touch waited on memory (docs/perf.md).
// Always inlined, for the reason simd::prefetch_read gives.
[[gnu::always_inline]] inline void prefetch_rows(const void* base, int64_t rows, int64_t stride_bytes,
                                                 int64_t row_bytes, bool for_write) {
  const char* p = static_cast<const char*>(base);
  for (int64_t r = 0; r < rows; ++r, p += stride_bytes)
    for (int64_t byte = 0; byte < row_bytes; byte += 64) {
      if (for_write)
        simd::prefetch_write(p + byte);
      else
        simd::prefetch_read(p + byte);
    }
}
// Bump allocator over one aligned buffer, zeroed unless asked not to. The buffer is the calling thread's own, one per
// slot, kept for the thread's next arena of that slot (grow-only): pool threads persist, so a
// kernel called every step page-faults its scratch in once, not on every call. At most one arena
// per slot may be alive on a thread at a time (kernels run one at a time on a thread).
class Arena {
 public:
  enum Slot { kTask = 0, kCall = 1 };  // per-range scratch of a parallel_for; per-call scratch of the caller
  explicit Arena(int64_t floats, Slot slot = kTask, bool zeroed = true) : capacity_(floats + 64 * 64) {
    static thread_local AlignedBuffer buffers[2];
    AlignedBuffer& buffer = buffers[slot];
    const size_t bytes = sizeof(float) * static_cast<size_t>(capacity_);
    if (buffer.bytes() < bytes) buffer = AlignedBuffer(bytes);
    data_ = buffer.as<float>();
    if (zeroed) std::memset(data_, 0, bytes);
  }
  float* take(int64_t floats) {
    float* p = data_ + used_;
    used_ += round_up(floats, 16);
    LATHE_ASSERT(used_ <= capacity_);
    return p;
  }

 private:
  float* data_;
  int64_t capacity_, used_ = 0;
};

inline float* scratch(AlignedBuffer& buffer, int64_t floats) {
  buffer = AlignedBuffer(sizeof(float) * static_cast<size_t>(std::max<int64_t>(floats, 16)), /*zeroed=*/true);
  return buffer.as<float>();
}

// C[r][0 .. NV*W) (+)= sum_p A(r, p) * B[p][0 .. NV*W),  A(r, p) = a[r * a_row + p * a_col].
template <int MR, int NV>
inline void gemm_block(int64_t depth, const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t ldb,
                       float* c, int64_t ldc, bool accumulate) {
  VecF acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? VecF::load(c + r * ldc + v * W) : VecF::zero();
  for (int64_t p = 0; p < depth; ++p) {
    const float* b_row = b + p * ldb;
    VecF bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = VecF::load(b_row + v * W);
    for (int r = 0; r < MR; ++r) {
      VecF av = VecF::broadcast(a[r * a_row + p * a_col]);
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fma(av, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v].store(c + r * ldc + v * W);
}

// The register tiling of gemm and gemm_pairs: block.template operator()<MR, NV>(r, v) for strips of
// kRows rows (the last one the rows left) and groups of kMaxVectors vectors (the last one the
// vectors left), r and v the first row and vector of the tile.
template <class Block>
[[gnu::always_inline]] inline void for_each_tile(int64_t rows, int64_t vectors, Block&& block) {
  auto strip = [&]<int MR>(int64_t r) {
    int64_t v = 0;
    for (; v + kMaxVectors <= vectors; v += kMaxVectors) block.template operator()<MR, kMaxVectors>(r, v);
    const int64_t left = vectors - v;
    if (left == 1) block.template operator()<MR, 1>(r, v);
    if constexpr (kMaxVectors > 2) {
      if (left == 2) block.template operator()<MR, 2>(r, v);
      if (left == 3) block.template operator()<MR, 3>(r, v);
    }
  };
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) strip.template operator()<kRows>(r);
  switch (rows - r) {
    case 1:
      return strip.template operator()<1>(r);
    case 2:
      return strip.template operator()<2>(r);
    case 3:
      return strip.template operator()<3>(r);
    case 4:
      return strip.template operator()<4>(r);
    case 5:
      return strip.template operator()<5>(r);
    default:
      return;
  }
}

// C (rows x vectors*W, leading dimension ldc) (+)= A (rows x depth, strides a_row / a_col) * B (depth x
// vectors*W, leading dimension ldb). B and C columns are padded to whole vectors.
inline void gemm(int64_t rows, int64_t vectors, int64_t depth, const float* a, int64_t a_row, int64_t a_col,
                 const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for_each_tile(rows, vectors, [&]<int MR, int NV>(int64_t r, int64_t v) {
    gemm_block<MR, NV>(depth, a + r * a_row, a_row, a_col, b + v * W, ldb, c + r * ldc + v * W, ldc, accumulate);
  });
}

inline float to_float(float x) { return x; }
inline float to_float(uint16_t bf16) {
  const uint32_t bits = static_cast<uint32_t>(bf16) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// bf16 depth pairs: the products whose two operands are bf16 inputs (Q K^T, dO V^T) on the CPU's bf16
// dot product (vdpbf16ps: per f32 lane, acc += a[2i] b[2i] + a[2i + 1] b[2i + 1], the products
// exact). The A operand is rows of bf16, a row's pair q at elements 2q and 2q + 1 (row length
// even); the B operand is pair rows of 32-bit units, unit (q, c) holding column c's pair q (the
// low half the even element), `ldb` units from one pair row to the next. The AVX-512 build runs
// vdpbf16ps (inputs and results denormal-free, as the instruction defines); the other builds
// take each pair as two FMAs, so the layout and the kernels' logic are testable on any machine.

// C[r][0 .. NV*W) (+)= sum over pairs q < `pairs` of A row r's pair q . B's units (q, 0 .. NV*W).
template <int MR, int NV>
inline void pair_block(int64_t pairs, const uint16_t* a, int64_t lda, const uint32_t* b, int64_t ldb, float* c,
                       int64_t ldc, bool accumulate) {
  VecF acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? VecF::load(c + r * ldc + v * W) : VecF::zero();
  for (int64_t q = 0; q < pairs; ++q) {
    const uint32_t* b_row = b + q * ldb;
    uint32_t words[MR];
    for (int r = 0; r < MR; ++r) std::memcpy(&words[r], a + r * lda + 2 * q, 4);
#if LATHE_KERNEL_ISA == 2
    __m512bh bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b_row + v * W);
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(words[r]));
      for (int v = 0; v < NV; ++v) acc[r][v].v = _mm512_dpbf16_ps(acc[r][v].v, av, bv[v]);
    }
#else
    VecF even[NV], odd[NV];
    for (int v = 0; v < NV; ++v)
      simd::load_bf16_pairs(reinterpret_cast<const uint16_t*>(b_row + v * W), even[v], odd[v]);
    for (int r = 0; r < MR; ++r) {
      const VecF a_even = VecF::broadcast(to_float(static_cast<uint16_t>(words[r] & 0xffffu)));
      const VecF a_odd = VecF::broadcast(to_float(static_cast<uint16_t>(words[r] >> 16)));
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fma(a_odd, odd[v], simd::fma(a_even, even[v], acc[r][v]));
    }
#endif
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v].store(c + r * ldc + v * W);
}

// C (rows x vectors*W, leading dimension ldc) (+)= A (rows x 2 pairs bf16, leading dimension lda)
// times B (pairs x vectors*W units, leading dimension ldb), as gemm does for floats.
inline void gemm_pairs(int64_t rows, int64_t vectors, int64_t pairs, const uint16_t* a, int64_t lda, const uint32_t* b,
                       int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for_each_tile(rows, vectors, [&]<int MR, int NV>(int64_t r, int64_t v) {
    pair_block<MR, NV>(pairs, a + r * lda, lda, b + v * W, ldb, c + r * ldc + v * W, ldc, accumulate);
  });
}

// Copies `rows` rows of `dim` elements (source stride `stride`) times `factor` into float rows of
// `padded` (zero tail).
template <class Element>
void pack_rows(const Element* source, int64_t stride, int64_t rows, int64_t dim, int64_t padded, float factor,
               float* packed) {
  for (int64_t r = 0; r < rows; ++r) {
    float* out = packed + r * padded;
    for (int64_t d = 0; d < dim; ++d) out[d] = to_float(source[r * stride + d]) * factor;
    for (int64_t d = dim; d < padded; ++d) out[d] = 0.0f;
  }
}

// Transposes one W x W block in registers (the only ISA-specific code here, kept beside its
// callers rather than in core/simd.h): out[j * out_stride + i] = in[i * in_stride + j] for
// i, j < W (unaligned rows; in and out must not overlap).
inline void transpose_block(const float* in, int64_t in_stride, float* out, int64_t out_stride) {
#if LATHE_KERNEL_ISA == 2
  // Four stages: 32-bit and 64-bit interleaves inside 128-bit lanes, then two 128-bit lane shuffles.
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in + i * in_stride);
  for (int i = 0; i < 16; i += 2)
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  for (int i = 0; i < 16; i += 4) {
    const __m512d t0 = _mm512_castps_pd(t[i]), t1 = _mm512_castps_pd(t[i + 1]);
    const __m512d t2 = _mm512_castps_pd(t[i + 2]), t3 = _mm512_castps_pd(t[i + 3]);
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2)), r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3)), r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  // r[4a + k], lane l now holds column 4l + k of rows 4a .. 4a + 3.
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88), t[4 + k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);
    t[8 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88), r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
    r[4 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88);
    r[12 + k] = _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xdd);
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_ps(out + i * out_stride, r[i]);
#elif LATHE_KERNEL_ISA == 1
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(in + i * in_stride);
  for (int i = 0; i < 8; i += 2)
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(out + k * out_stride, _mm256_permute2f128_ps(r[k], r[4 + k], 0x20));
    _mm256_storeu_ps(out + (4 + k) * out_stride, _mm256_permute2f128_ps(r[k], r[4 + k], 0x31));
  }
#else
  (void)in_stride, (void)out_stride;
  *out = *in;
#endif
}

// packed[d * padded_count + c] = source[c * stride + d] for `count` rows of `dim` floats, zero for
// count <= c < padded_count: pack_transposed for float, W x W blocks in registers.
inline void transpose_padded(const float* source, int64_t stride, int64_t count, int64_t dim, int64_t padded_count,
                             float* packed) {
  const int64_t full_count = count / W * W, full_dim = dim / W * W;
  for (int64_t d0 = 0; d0 < full_dim; d0 += W)
    for (int64_t c0 = 0; c0 < full_count; c0 += W)
      transpose_block(source + c0 * stride + d0, stride, packed + d0 * padded_count + c0, padded_count);
  for (int64_t d = 0; d < dim; ++d) {
    float* out = packed + d * padded_count;
    for (int64_t c = d < full_dim ? full_count : 0; c < count; ++c) out[c] = source[c * stride + d];
    for (int64_t c = count; c < padded_count; ++c) out[c] = 0.0f;
  }
}

// packed[d * padded_count + c] = source[c][d] for `count` rows of `dim` elements; zero padding.
// Floats go through W x W register transposes (transpose_padded); bf16 element by element.
template <class Element>
void pack_transposed(const Element* source, int64_t stride, int64_t count, int64_t dim, int64_t padded_count,
                     float* packed) {
  if constexpr (std::is_same_v<Element, float>) {
    transpose_padded(source, stride, count, dim, padded_count, packed);
    return;
  }
  for (int64_t d = 0; d < dim; ++d) {
    float* out = packed + d * padded_count;
    for (int64_t c = 0; c < count; ++c) out[c] = to_float(source[c * stride + d]);
    for (int64_t c = count; c < padded_count; ++c) out[c] = 0.0f;
  }
}

// The A operand of gemm_pairs: `rows` rows of `dim` bf16 values (source stride `stride`) copied
// into rows of `padded` (even, >= dim) values, zero tail.
inline void pack_bf16_rows(const uint16_t* source, int64_t stride, int64_t rows, int64_t dim, int64_t padded,
                           uint16_t* packed) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(packed + r * padded, source + r * stride, sizeof(uint16_t) * dim);
    std::memset(packed + r * padded + dim, 0, sizeof(uint16_t) * (padded - dim));
  }
}

// The B operand of gemm_pairs whose columns are source's rows: unit (q, c) = the pair (source[c][2q],
// source[c][2q + 1]) at packed[q * padded_count + c] for q < (dim + 1) / 2 (an odd dim's last pair
// zero above), zero for count <= c < padded_count. With an even dim and 4-byte-aligned rows the
// pairs are 32-bit units of the source, transposed W x W at a time in registers (transpose_padded:
// moves only, the bits are kept); otherwise unit by unit.
inline void pack_pairs_transposed(const uint16_t* source, int64_t stride, int64_t count, int64_t dim,
                                  int64_t padded_count, uint32_t* packed) {
  const bool whole_units = dim % 2 == 0 && stride % 2 == 0 && reinterpret_cast<uintptr_t>(source) % 4 == 0;
  if (whole_units) {
    transpose_padded(reinterpret_cast<const float*>(source), stride / 2, count, dim / 2, padded_count,
                     reinterpret_cast<float*>(packed));
    return;
  }
  for (int64_t q = 0; q < (dim + 1) / 2; ++q) {
    uint32_t* out = packed + q * padded_count;
    for (int64_t c = 0; c < count; ++c) {
      const uint16_t* pair = source + c * stride + 2 * q;
      out[c] = pair[0] | (2 * q + 1 < dim ? static_cast<uint32_t>(pair[1]) << 16 : 0u);
    }
    for (int64_t c = count; c < padded_count; ++c) out[c] = 0;
  }
}

// The B operand of gemm_pairs whose depth runs along source's rows: unit (q, c) = the pair
// (source[2q][c], source[2q + 1][c]) at packed[q * padded_dim + c] for q < (count + 1) / 2 (an odd
// count's last pair zero above) and c < dim, zero for dim <= c < padded_dim. V for P V; dO, Q and
// K for P^T dO, dS^T Q and dS K. A loop the compiler vectorises (widen, shift, or).
inline void pack_row_pairs(const uint16_t* source, int64_t stride, int64_t count, int64_t dim, int64_t padded_dim,
                           uint32_t* packed) {
  for (int64_t q = 0; q < (count + 1) / 2; ++q) {
    const uint16_t* even = source + 2 * q * stride;
    const uint16_t* odd = 2 * q + 1 < count ? even + stride : nullptr;
    uint32_t* out = packed + q * padded_dim;
    if (odd)
      for (int64_t c = 0; c < dim; ++c) out[c] = even[c] | static_cast<uint32_t>(odd[c]) << 16;
    else
      for (int64_t c = 0; c < dim; ++c) out[c] = even[c];
    for (int64_t c = dim; c < padded_dim; ++c) out[c] = 0;
  }
}

// Whether this build may round to bf16 with vcvtneps2bf16: an AVX-512 build compiled with
// AVX512_BF16, for kernels that run only where the CPU has it (the vdpbf16ps kernels, "avx512_bf16",
// and the AMX ones: every AMX CPU has AVX512_BF16). The plain AVX-512 kernels also run on CPUs
// without it, so they never ask for it.
#if LATHE_KERNEL_ISA == 2 && defined(__AVX512BF16__)
inline constexpr bool kNativeBf16Build = true;
#else
inline constexpr bool kNativeBf16Build = false;
#endif

// W floats into bf16, rounded to nearest even: with kNative (only where kNativeBf16Build)
// vcvtneps2bf16, one instruction; else VecF::store_bf16's integer rounding, five. They differ on a
// denormal, which vcvtneps2bf16 reads as zero, as vdpbf16ps and tdpbf16ps read a bf16 denormal.
template <bool kNative>
[[gnu::always_inline]] inline void store_bf16_rounded(VecF x, uint16_t* out) {
#if LATHE_KERNEL_ISA == 2 && defined(__AVX512BF16__)
  if constexpr (kNative) {
    const __m256bh bits = _mm512_cvtneps_pbh(x.v);
    std::memcpy(out, &bits, sizeof(bits));
    return;
  }
#endif
  static_assert(!kNative || kNativeBf16Build, "vcvtneps2bf16 needs an AVX-512 build with AVX512_BF16");
  x.store_bf16(out);
}

// The A operand of gemm_pairs from f32 rows: dest[r * ld_dest + c] = bf16(source[r * ld_source + c])
// (round to nearest even) for c < length (a multiple of W), and 0 at c = length where length is odd
// (only the scalar build's W = 1), so the row ends in whole pairs. P and dS as they enter their
// products in the bf16 pair kernels. kNative: see store_bf16_rounded.
template <bool kNative = false>
inline void round_rows_to_pairs(const float* source, int64_t ld_source, int64_t rows, int64_t length, uint16_t* dest,
                                int64_t ld_dest) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < length; c += W)
      store_bf16_rounded<kNative>(VecF::load(source + r * ld_source + c), dest + r * ld_dest + c);
    if (length % 2 != 0) dest[r * ld_dest + length] = 0;
  }
}

// out[c * pitch + r] = bf16(source[r * ld + c]) for r < rows and c < count, zero for rows <= r <
// pitch (pitch even and a multiple of W): P^T or dS^T as the A operand of a product over query
// pairs or tiles. Transposed W x W blocks at a time into `transposed` (count x pitch floats), then
// rounded row by row.
template <bool kNative = false>
inline void round_transposed(const float* source, int64_t ld, int64_t rows, int64_t count, int64_t pitch,
                             float* transposed, uint16_t* out) {
  transpose_padded(source, ld, rows, count, pitch, transposed);
  round_rows_to_pairs<kNative>(transposed, pitch, count, pitch, out, pitch);
}

// Stores the first n (<= W) lanes of a vector as float or bf16 (round to nearest even).
template <class Element>
inline void store_lanes(VecF value, Element* p, int64_t n) {
  if constexpr (std::is_same_v<Element, float>)
    n >= W ? value.store(p) : value.store_partial(p, static_cast<int>(n));
  else
    n >= W ? value.store_bf16(p) : value.store_bf16_partial(p, static_cast<int>(n));
}

}  // namespace lathe::LATHE_ISA_NS::attention_tiles
