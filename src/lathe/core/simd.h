// The vector abstraction CPU kernels are written in. A kernel source file is compiled once per
// instruction set (see lathe_add_isa_kernels in CMake) with LATHE_KERNEL_ISA set to
//   0: portable scalar (VecF is one float)   1: AVX2+FMA (8 floats)   2: AVX-512 (16 floats)
// and everything in it lives in namespace lathe::LATHE_ISA_NS (scalar, avx2 or avx512), so the
// three compilations never share a symbol. Kernel files must keep their code inside that
// namespace and avoid out-of-line shared helpers: an inline function of a shared header that the
// compiler emits out of line in an AVX-512 object could be picked by the linker for every caller.
#pragma once

#ifndef LATHE_KERNEL_ISA
#error "simd.h is only for kernel sources compiled through lathe_add_isa_kernels"
#endif

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

// A compilation may name its namespace itself: the AMX kernels' AVX-512 build on the tile
// emulation (lathe_add_amx_kernels) is lathe::avx512_emulated_tiles, beside lathe::avx512.
#ifndef LATHE_ISA_NS
#if LATHE_KERNEL_ISA == 0
#define LATHE_ISA_NS scalar
#elif LATHE_KERNEL_ISA == 1
#define LATHE_ISA_NS avx2
#else
#define LATHE_ISA_NS avx512
#endif
#endif

namespace lathe::LATHE_ISA_NS::simd {

#if LATHE_KERNEL_ISA == 2
struct VecF {
  static constexpr int width = 16;
  __m512 v;
  static VecF zero() { return {_mm512_setzero_ps()}; }
  static VecF broadcast(float x) { return {_mm512_set1_ps(x)}; }
  static VecF load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static VecF load_partial(const float* p, int n) { return {_mm512_maskz_loadu_ps(mask(n), p)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store_partial(float* p, int n) const { _mm512_mask_storeu_ps(p, mask(n), v); }
  // bf16 stored as uint16_t bit patterns.
  static VecF load_bf16(const uint16_t* p) {
    __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16))};
  }
  static VecF load_bf16_partial(const uint16_t* p, int n) {
    __m256i raw = _mm256_maskz_loadu_epi16(static_cast<__mmask16>(mask(n)), p);
    return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16))};
  }
  __m256i to_bf16_bits() const {  // round to nearest even, NaN stays NaN
    __m512i bits = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    rounded = _mm512_mask_or_epi32(rounded, nan, bits, _mm512_set1_epi32(0x00400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
  }
  void store_bf16(uint16_t* p) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16_bits()); }
  void store_bf16_partial(uint16_t* p, int n) const {
    _mm256_mask_storeu_epi16(p, static_cast<__mmask16>(mask(n)), to_bf16_bits());
  }
  float reduce_add() const { return _mm512_reduce_add_ps(v); }
  float reduce_max() const { return _mm512_reduce_max_ps(v); }
  float first() const { return _mm512_cvtss_f32(v); }  // lane 0
  static __mmask16 mask(int n) { return static_cast<__mmask16>(n >= 16 ? 0xffff : (1u << n) - 1u); }
};
inline VecF operator+(VecF a, VecF b) { return {_mm512_add_ps(a.v, b.v)}; }
inline VecF operator-(VecF a, VecF b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline VecF operator*(VecF a, VecF b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline VecF operator/(VecF a, VecF b) { return {_mm512_div_ps(a.v, b.v)}; }
inline VecF fma(VecF a, VecF b, VecF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }    // a*b+c
inline VecF fnma(VecF a, VecF b, VecF c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }  // c-a*b
inline VecF max(VecF a, VecF b) { return {_mm512_max_ps(a.v, b.v)}; }
// Whether a > b in any lane (false for NaN lanes).
inline bool any_greater(VecF a, VecF b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ) != 0; }
// x with lanes i outside [lo, hi) zeroed (lo and hi any integers).
inline VecF keep_lanes(VecF x, int lo, int hi) {
  const int l = lo < 0 ? 0 : lo > 16 ? 16 : lo, h = hi < 0 ? 0 : hi > 16 ? 16 : hi;
  return {_mm512_maskz_mov_ps(static_cast<__mmask16>(VecF::mask(h) & ~VecF::mask(l)), x.v)};
}
inline VecF min(VecF a, VecF b) { return {_mm512_min_ps(a.v, b.v)}; }
inline VecF sqrt(VecF a) { return {_mm512_sqrt_ps(a.v)}; }
inline VecF round_nearest(VecF a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
inline VecF floor(VecF a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)}; }
// a * 2^n for integral-valued n in [-126, 127].
inline VecF scale_pow2(VecF a, VecF n) {
  __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n.v), _mm512_set1_epi32(127)), 23);
  return {_mm512_mul_ps(a.v, _mm512_castsi512_ps(e))};
}
// where(x < limit) zero, else value
inline VecF zero_below(VecF value, VecF x, float limit) {
  __mmask16 below = _mm512_cmp_ps_mask(x.v, _mm512_set1_ps(limit), _CMP_LT_OQ);
  return {_mm512_mask_blend_ps(below, value.v, _mm512_setzero_ps())};
}

#elif LATHE_KERNEL_ISA == 1
struct VecF {
  static constexpr int width = 8;
  __m256 v;
  static VecF zero() { return {_mm256_setzero_ps()}; }
  static VecF broadcast(float x) { return {_mm256_set1_ps(x)}; }
  static VecF load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static VecF load_partial(const float* p, int n) { return {_mm256_maskload_ps(p, mask(n))}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void store_partial(float* p, int n) const { _mm256_maskstore_ps(p, mask(n), v); }
  static VecF load_bf16(const uint16_t* p) {
    __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16))};
  }
  static VecF load_bf16_partial(const uint16_t* p, int n) {
    uint16_t tmp[8] = {};
    std::memcpy(tmp, p, sizeof(uint16_t) * n);
    return load_bf16(tmp);
  }
  __m128i to_bf16_bits() const {
    __m256i bits = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    rounded = _mm256_blendv_epi8(rounded, _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000)), nan);
    __m256i shifted = _mm256_srli_epi32(rounded, 16);
    __m128i low = _mm256_castsi256_si128(shifted), high = _mm256_extracti128_si256(shifted, 1);
    return _mm_packus_epi32(low, high);
  }
  void store_bf16(uint16_t* p) const { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), to_bf16_bits()); }
  void store_bf16_partial(uint16_t* p, int n) const {
    uint16_t tmp[8];
    store_bf16(tmp);
    std::memcpy(p, tmp, sizeof(uint16_t) * n);
  }
  float reduce_add() const {
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
    sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
    return _mm_cvtss_f32(sum);
  }
  float reduce_max() const {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  float first() const { return _mm256_cvtss_f32(v); }  // lane 0
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};
inline VecF operator+(VecF a, VecF b) { return {_mm256_add_ps(a.v, b.v)}; }
inline VecF operator-(VecF a, VecF b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline VecF operator*(VecF a, VecF b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline VecF operator/(VecF a, VecF b) { return {_mm256_div_ps(a.v, b.v)}; }
inline VecF fma(VecF a, VecF b, VecF c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline VecF fnma(VecF a, VecF b, VecF c) { return {_mm256_fnmadd_ps(a.v, b.v, c.v)}; }
inline VecF max(VecF a, VecF b) { return {_mm256_max_ps(a.v, b.v)}; }
inline bool any_greater(VecF a, VecF b) { return _mm256_movemask_ps(_mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ)) != 0; }
inline VecF keep_lanes(VecF x, int lo, int hi) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i keep = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), lane),
                                           _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane));  // lo <= i < hi
  return {_mm256_and_ps(x.v, _mm256_castsi256_ps(keep))};
}
inline VecF min(VecF a, VecF b) { return {_mm256_min_ps(a.v, b.v)}; }
inline VecF sqrt(VecF a) { return {_mm256_sqrt_ps(a.v)}; }
inline VecF round_nearest(VecF a) { return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
inline VecF floor(VecF a) { return {_mm256_floor_ps(a.v)}; }
inline VecF scale_pow2(VecF a, VecF n) {
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n.v), _mm256_set1_epi32(127)), 23);
  return {_mm256_mul_ps(a.v, _mm256_castsi256_ps(e))};
}
inline VecF zero_below(VecF value, VecF x, float limit) {
  __m256 below = _mm256_cmp_ps(x.v, _mm256_set1_ps(limit), _CMP_LT_OQ);
  return {_mm256_blendv_ps(value.v, _mm256_setzero_ps(), below)};
}

#else
struct VecF {
  static constexpr int width = 1;
  float v;
  static VecF zero() { return {0.0f}; }
  static VecF broadcast(float x) { return {x}; }
  static VecF load(const float* p) { return {*p}; }
  static VecF load_partial(const float* p, int n) { return {n > 0 ? *p : 0.0f}; }
  void store(float* p) const { *p = v; }
  void store_partial(float* p, int n) const {
    if (n > 0) *p = v;
  }
  static VecF load_bf16(const uint16_t* p) {
    uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float x;
    std::memcpy(&x, &bits, 4);
    return {x};
  }
  static VecF load_bf16_partial(const uint16_t* p, int n) { return n > 0 ? load_bf16(p) : VecF{0.0f}; }
  uint16_t to_bf16_bits() const {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
    return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  }
  void store_bf16(uint16_t* p) const { *p = to_bf16_bits(); }
  void store_bf16_partial(uint16_t* p, int n) const {
    if (n > 0) store_bf16(p);
  }
  float reduce_add() const { return v; }
  float reduce_max() const { return v; }
  float first() const { return v; }
};
inline VecF operator+(VecF a, VecF b) { return {a.v + b.v}; }
inline VecF operator-(VecF a, VecF b) { return {a.v - b.v}; }
inline VecF operator*(VecF a, VecF b) { return {a.v * b.v}; }
inline VecF operator/(VecF a, VecF b) { return {a.v / b.v}; }
inline VecF fma(VecF a, VecF b, VecF c) { return {a.v * b.v + c.v}; }
inline VecF fnma(VecF a, VecF b, VecF c) { return {c.v - a.v * b.v}; }
inline VecF max(VecF a, VecF b) { return {a.v > b.v ? a.v : b.v}; }
inline bool any_greater(VecF a, VecF b) { return a.v > b.v; }
inline VecF keep_lanes(VecF x, int lo, int hi) { return {lo <= 0 && 0 < hi ? x.v : 0.0f}; }
inline VecF min(VecF a, VecF b) { return {a.v < b.v ? a.v : b.v}; }
inline VecF sqrt(VecF a) { return {std::sqrt(a.v)}; }
inline VecF round_nearest(VecF a) { return {std::nearbyint(a.v)}; }
inline VecF floor(VecF a) { return {std::floor(a.v)}; }
inline VecF scale_pow2(VecF a, VecF n) { return {std::ldexp(a.v, static_cast<int>(n.v))}; }
inline VecF zero_below(VecF value, VecF x, float limit) { return {x.v < limit ? 0.0f : value.v}; }
#endif

// Element access for kernels whose tensors are float or bf16 (stored as uint16_t bit patterns):
// a full vector of W elements, or only the first n < W (zero-filled on load, untouched on store).
template <class Element>
inline VecF load_row(const Element* p, int64_t n) {
  if constexpr (std::is_same_v<Element, float>)
    return n >= VecF::width ? VecF::load(p) : VecF::load_partial(p, static_cast<int>(n));
  else
    return n >= VecF::width ? VecF::load_bf16(p) : VecF::load_bf16_partial(p, static_cast<int>(n));
}

template <class Element>
inline void store_row(Element* p, VecF v, int64_t n) {
  if constexpr (std::is_same_v<Element, float>)
    n >= VecF::width ? v.store(p) : v.store_partial(p, static_cast<int>(n));
  else
    n >= VecF::width ? v.store_bf16(p) : v.store_bf16_partial(p, static_cast<int>(n));
}

// W bf16 pairs (2W values, as the bf16 dot product vdpbf16ps reads them) split into their even and
// odd elements as floats: the FMA form of a pair product where the CPU has no vdpbf16ps. Read as
// bytes in the scalar build (the pairs may have been written as 32-bit units of another type).
inline void load_bf16_pairs(const uint16_t* p, VecF& even, VecF& odd) {
#if LATHE_KERNEL_ISA == 2
  const __m512i x = _mm512_loadu_si512(p);
  even.v = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
  odd.v = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
#elif LATHE_KERNEL_ISA == 1
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  even.v = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
  odd.v = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
#else
  uint32_t unit;
  std::memcpy(&unit, p, 4);
  const uint32_t low = unit << 16, high = unit & 0xffff0000u;
  std::memcpy(&even.v, &low, 4);
  std::memcpy(&odd.v, &high, 4);
#endif
}

// Like store_row, but full vectors at vector-aligned addresses go out as non-temporal (streaming)
// stores: for outputs larger than the caches this saves the read-for-ownership of every output
// line, a third of the DRAM traffic of a read-one-write-one kernel. Call streaming_fence() before
// the parallel chunk that streamed ends.
template <class Element>
inline void store_row_streaming(Element* p, VecF v, int64_t n) {
  constexpr uintptr_t kAlignment = sizeof(Element) * VecF::width;
  if (n >= VecF::width && (reinterpret_cast<uintptr_t>(p) & (kAlignment - 1)) == 0) {
#if LATHE_KERNEL_ISA == 2
    if constexpr (std::is_same_v<Element, float>)
      _mm512_stream_ps(p, v.v);
    else
      _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v.to_bf16_bits());
    return;
#elif LATHE_KERNEL_ISA == 1
    if constexpr (std::is_same_v<Element, float>)
      _mm256_stream_ps(p, v.v);
    else
      _mm_stream_si128(reinterpret_cast<__m128i*>(p), v.to_bf16_bits());
    return;
#endif
  }
  store_row(p, v, n);
}

// acc[0, W) += the lanes of v, widened to double: for sums whose result is a small difference of
// large float terms, where a float sum (even compensated) loses a few ulps of the terms' magnitude.
inline void accumulate_doubles(double* acc, VecF v) {
#if LATHE_KERNEL_ISA == 2
  const __m512d low = _mm512_cvtps_pd(_mm512_castps512_ps256(v.v));
  const __m512d high = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v.v), 1)));
  _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), low));
  _mm512_storeu_pd(acc + 8, _mm512_add_pd(_mm512_loadu_pd(acc + 8), high));
#elif LATHE_KERNEL_ISA == 1
  const __m256d low = _mm256_cvtps_pd(_mm256_castps256_ps128(v.v));
  const __m256d high = _mm256_cvtps_pd(_mm256_extractf128_ps(v.v, 1));
  _mm256_storeu_pd(acc, _mm256_add_pd(_mm256_loadu_pd(acc), low));
  _mm256_storeu_pd(acc + 4, _mm256_add_pd(_mm256_loadu_pd(acc + 4), high));
#else
  acc[0] += static_cast<double>(v.v);
#endif
}

inline void streaming_fence() {
#if LATHE_KERNEL_ISA >= 1
  _mm_sfence();
#endif
}

// Requests the cache line holding p into L1 (prefetch_write: a line about to be written). Use
// these instead of a local wrapper: GCC 12's IPA pure-const pass takes a plain inline function
// whose body is only a prefetch for one without side effects and deletes its calls once the
// caller is large (matmul's C-row prefetch was missing from every build until 2026-12-03, ~5% of
// a 2048^3 product's time spent waiting on C in the tile store). Always inlined, they survive.
[[gnu::always_inline]] inline void prefetch_read(const void* p) { __builtin_prefetch(p, 0, 3); }
[[gnu::always_inline]] inline void prefetch_write(const void* p) { __builtin_prefetch(p, 1, 3); }
// The line into L2 only (prefetcht1): for requests further ahead than L1's few miss buffers hold.
[[gnu::always_inline]] inline void prefetch_read_l2(const void* p) { __builtin_prefetch(p, 0, 2); }

inline VecF& operator+=(VecF& a, VecF b) { return a = a + b; }
inline VecF& operator*=(VecF& a, VecF b) { return a = a * b; }

// e^x = 2^n e^r: returns e^r for r = x - n ln2 (|r| <= ln2 / 2, Cephes expf's minimax polynomial)
// and sets *n = round(x / ln2). Shared by exp() and exp_unclamped(), which apply 2^n each its way;
// always inlined, so exp() inlines into a kernel exactly as it did when it held this code itself.
[[gnu::always_inline]] inline VecF exp_reduced(VecF x, VecF* n) {
  *n = round_nearest(x * VecF::broadcast(1.44269504088896341f));
  VecF r = fnma(*n, VecF::broadcast(0.693359375f), x);
  r = fnma(*n, VecF::broadcast(-2.12194440e-4f), r);
  VecF p = VecF::broadcast(1.9875691500e-4f);
  p = fma(p, r, VecF::broadcast(1.3981999507e-3f));
  p = fma(p, r, VecF::broadcast(8.3334519073e-3f));
  p = fma(p, r, VecF::broadcast(4.1665795894e-2f));
  p = fma(p, r, VecF::broadcast(1.6666665459e-1f));
  p = fma(p, r, VecF::broadcast(5.0000001201e-1f));
  return fma(p * r, r, r + VecF::broadcast(1.0f));
}

// exp(x) with relative error about 2 ulp over the float range; exp(x) = 0 below -87.3 and
// saturates (to about 3.4e38) above 88.7. NaN propagates.
inline VecF exp(VecF x) {
  const VecF clamped = min(max(x, VecF::broadcast(-87.3f)), VecF::broadcast(88.7f));
  VecF n;
  const VecF p = exp_reduced(clamped, &n);
  VecF result = zero_below(scale_pow2(p, n), x, -87.3f);
  return result + (x - x);  // NaN in, NaN out
}

// exp(x) for softmax passes (attention, the LM head: arguments score - max or score - lse): the
// same bits as exp() above wherever the result is a normal float, and IEEE exp's answer where it is
// not: a denormal or 0 below -87.3 (exp() gives 0), inf above 88.7 (exp() saturates). On AVX-512
// the power of two is applied by vscalefps, whose underflow and overflow need none of exp()'s
// clamps, exponent build and blend: 12 instructions where exp() takes 22. Elsewhere it is exp().
// NaN propagates.
inline VecF exp_unclamped(VecF x) {
#if LATHE_KERNEL_ISA == 2
  x = max(VecF::broadcast(-110.0f), x);  // vmaxps returns its second operand, x, for a NaN
  VecF n;
  const VecF p = exp_reduced(x, &n);
  return {_mm512_scalef_ps(p.v, n.v)};
#else
  return exp(x);
#endif
}

// 2^t to a relative error under 1.6e-7 (under 0.8e-7 of it the polynomial, the rest its float
// evaluation), for the softmaxes whose P is rounded to bf16 next: the attention forward's and
// backward's P before their bf16 products. A degree-5 minimax polynomial of the fraction
// f = t - floor(t) in [0, 1), times 2^floor(t). Below t = -126 the result is 0 (or, on AVX-512, a
// denormal down to t = -150, then 0); NaN propagates. On AVX-512 it is 9 instructions (vreduceps
// takes the fraction, vscalefps applies the power) where exp_unclamped takes 13 with its argument's
// multiply; the coefficients came from a Remez fit of the relative error in double precision.
// Degree 4 (2.7e-6) was enough for P itself, but the row sums that make the forward's lse are of
// the same values: seq_k 2 put lse 2.5e-6 from the float64 oracle, where the tolerance allowed
// 1.3e-6 (a contract test failure about one seed in 30 at such shapes).
inline VecF exp2_softmax(VecF t) {
  t = max(VecF::broadcast(-200.0f), t);  // vmaxps returns its second operand, t, for a NaN
#if LATHE_KERNEL_ISA == 2
  const VecF f = {_mm512_reduce_ps(t.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)};  // t - floor(t)
#else
  const VecF n = floor(t), f = t - n;
#endif
  VecF p = VecF::broadcast(1.877576695e-3f);
  p = fma(p, f, VecF::broadcast(8.989339694e-3f));
  p = fma(p, f, VecF::broadcast(5.582631752e-2f));
  p = fma(p, f, VecF::broadcast(2.401536107e-1f));
  p = fma(p, f, VecF::broadcast(6.931530833e-1f));
  p = fma(p, f, VecF::broadcast(9.999999404e-1f));
#if LATHE_KERNEL_ISA == 2
  return {_mm512_scalef_ps(p.v, t.v)};  // p * 2^floor(t)
#else
  return zero_below(scale_pow2(p, min(max(n, VecF::broadcast(-126.0f)), VecF::broadcast(127.0f))), t, -126.0f) +
         (t - t);  // NaN in, NaN out
#endif
}

inline VecF sigmoid(VecF x) { return VecF::broadcast(1.0f) / (VecF::broadcast(1.0f) + exp(VecF::broadcast(0.0f) - x)); }

// tanh(x) = 1 - 2 / (exp(2x) + 1), accurate to a few ulp away from 0 and exact in sign.
inline VecF tanh(VecF x) {
  VecF e = exp(x + x);
  return VecF::broadcast(1.0f) - VecF::broadcast(2.0f) / (e + VecF::broadcast(1.0f));
}

// tanh(x) and its derivative sech^2(x) = 4e / (e + 1)^2 with e = exp(2x), both from one exp.
// Computing the derivative as 1 - tanh^2 instead cancels catastrophically where tanh is near +-1
// (about 15x larger error in GELU's backward). x is clamped to +-40 first: exp near its upper clamp
// returns inf (2^128), and inf * 0 gave NaN derivatives for GELU inputs beyond ~10; past 40, tanh
// is +-1 in float and sech^2 < 1e-34 either way.
inline VecF tanh_with_derivative(VecF x, VecF* derivative) {
  const VecF bounded = min(max(x, VecF::broadcast(-40.0f)), VecF::broadcast(40.0f));
  VecF e = exp(bounded + bounded);
  VecF r = VecF::broadcast(1.0f) / (e + VecF::broadcast(1.0f));
  *derivative = (e * r) * (VecF::broadcast(4.0f) * r);
  return fnma(VecF::broadcast(2.0f), r, VecF::broadcast(1.0f));
}

}  // namespace lathe::LATHE_ISA_NS::simd

#include "lathe/core/cpu_features.h"

namespace lathe::LATHE_ISA_NS {
// The Impl::isa and Impl::name of implementations built from this compilation.
inline constexpr Isa kIsa = LATHE_KERNEL_ISA == 2 ? Isa::avx512 : LATHE_KERNEL_ISA == 1 ? Isa::avx2 : Isa::scalar;
inline constexpr const char* kIsaName = LATHE_KERNEL_ISA == 2 ? "avx512" : LATHE_KERNEL_ISA == 1 ? "avx2" : "scalar";
}  // namespace lathe::LATHE_ISA_NS
