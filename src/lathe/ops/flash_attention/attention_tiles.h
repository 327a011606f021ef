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

template <int MR>
inline void gemm_rows(int64_t vectors, int64_t depth, const float* a, int64_t a_row, int64_t a_col, const float* b,
                      int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  int64_t v = 0;
  for (; v + kMaxVectors <= vectors; v += kMaxVectors)
    gemm_block<MR, kMaxVectors>(depth, a, a_row, a_col, b + v * W, ldb, c + v * W, ldc, accumulate);
  const int64_t left = vectors - v;
  if (left == 1) gemm_block<MR, 1>(depth, a, a_row, a_col, b + v * W, ldb, c + v * W, ldc, accumulate);
  if constexpr (kMaxVectors > 2) {
    if (left == 2) gemm_block<MR, 2>(depth, a, a_row, a_col, b + v * W, ldb, c + v * W, ldc, accumulate);
    if (left == 3) gemm_block<MR, 3>(depth, a, a_row, a_col, b + v * W, ldb, c + v * W, ldc, accumulate);
  }
}

// C (rows x vectors*W, leading dimension ldc) (+)= A (rows x depth, strides a_row / a_col) * B (depth x
// vectors*W, leading dimension ldb). B and C columns are padded to whole vectors.
inline void gemm(int64_t rows, int64_t vectors, int64_t depth, const float* a, int64_t a_row, int64_t a_col,
                 const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (vectors <= 0) return;
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows)
    gemm_rows<kRows>(vectors, depth, a + r * a_row, a_row, a_col, b, ldb, c + r * ldc, ldc, accumulate);
  const float* a_tail = a + r * a_row;
  float* c_tail = c + r * ldc;
  switch (rows - r) {
    case 1:
      gemm_rows<1>(vectors, depth, a_tail, a_row, a_col, b, ldb, c_tail, ldc, accumulate);
      break;
    case 2:
      gemm_rows<2>(vectors, depth, a_tail, a_row, a_col, b, ldb, c_tail, ldc, accumulate);
      break;
    case 3:
      gemm_rows<3>(vectors, depth, a_tail, a_row, a_col, b, ldb, c_tail, ldc, accumulate);
      break;
    case 4:
      gemm_rows<4>(vectors, depth, a_tail, a_row, a_col, b, ldb, c_tail, ldc, accumulate);
      break;
    case 5:
      gemm_rows<5>(vectors, depth, a_tail, a_row, a_col, b, ldb, c_tail, ldc, accumulate);
      break;
    default:
      break;
  }
}

inline float to_float(float x) { return x; }
inline float to_float(uint16_t bf16) {
  const uint32_t bits = static_cast<uint32_t>(bf16) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
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

// Stores the first n (<= W) lanes of a vector as float or bf16 (round to nearest even).
template <class Element>
inline void store_lanes(VecF value, Element* p, int64_t n) {
  if constexpr (std::is_same_v<Element, float>)
    n >= W ? value.store(p) : value.store_partial(p, static_cast<int>(n));
  else
    n >= W ? value.store_bf16(p) : value.store_bf16_partial(p, static_cast<int>(n));
}

}  // namespace lathe::LATHE_ISA_NS::attention_tiles
