// Register-blocked tile products and element helpers shared by the attention kernels
// (flash_attention_kernels.cc, mla_decode_kernels.cc). Included only by kernel files compiled once per
// ISA (lathe_add_isa_kernels): everything lives in namespace lathe::LATHE_ISA_NS::attention_tiles.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "lathe/core/aligned_buffer.h"
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

// packed[d * padded_count + c] = source[c][d] for `count` rows of `dim` elements; zero padding.
template <class Element>
void pack_transposed(const Element* source, int64_t stride, int64_t count, int64_t dim, int64_t padded_count,
                     float* packed) {
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
