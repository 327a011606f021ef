// The tile-instruction layer AMX kernels are written against, so each kernel is written once and
// compiled twice (cmake/isa_kernels.cmake, lathe_add_amx_kernels, for files named *_amx_kernels.cc):
//   HardwareTiles (LATHE_AMX_TILES=1: the AVX-512 compilation plus -mamx-tile -mamx-bf16, namespace
//     lathe::avx512): the AMX intrinsics. Called only while core/amx.h's amx_active() (CPUID, XCR0,
//     the kernel's tile-data permission, a probe, not forbidden by --isa).
//   EmulatedTiles (LATHE_AMX_TILES=0, namespace lathe::scalar): a scalar emulation with the
//     instructions' semantics, so the kernels' layouts, blocking and edges are tested anywhere.
// Kernel sources only (after simd.h). Tile indices are template arguments, as the instructions
// take immediates. The interface, for `Tiles` either backend:
//   Tiles::configure(rows, colsb)          palette 1: all 8 tiles rows x colsb bytes (rows <= 16, colsb <= 64)
//   Tiles::release()                       back to the init state (after each kernel's share)
//   Tiles::zero<T>()                       tile T = 0
//   Tiles::load<T>(base, stride_bytes)     row r of tile T from base + r * stride_bytes
//   Tiles::store<T>(base, stride_bytes)
//   Tiles::dpbf16ps<C, A, B>()             tdpbf16ps: C (f32 rows x colsb/4) += A (bf16 pairs) . B (bf16 pairs)
//
// tdpbf16ps as the Intel SDM defines it (and the emulation computes it): for each row m of C and
// column n, two f32 partial sums (even and odd bf16 of each pair) start at zero and take one fused
// multiply-add per pair k, A[m][2k+h] * B[k][2n+h], in k order; then C[m][n] += even + odd. Every
// FMA and add rounds to nearest even, bf16 and f32 input denormals are read as zero and denormal
// results are flushed to zero; MXCSR plays no part.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if LATHE_AMX_TILES
#include <immintrin.h>
#endif

namespace lathe::LATHE_ISA_NS::amx_tiles {

#if LATHE_AMX_TILES

#define LATHE_FOR_EACH_TILE(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

struct HardwareTiles {
  struct alignas(64) Config {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  };
  static void configure(int rows, int colsb) {
    Config config;
    for (int t = 0; t < 8; ++t)
      config.colsb[t] = static_cast<uint16_t>(colsb), config.rows[t] = static_cast<uint8_t>(rows);
    // Not _tile_loadconfig: GCC's (12) names only the first 8 bytes of the config as the asm's
    // memory operand, so the compiler may drop the stores of colsb and rows as dead. It did in the
    // attention kernels: ldtilecfg loaded zero-sized tiles, and the first tile instruction raised
    // #UD (SIGILL on the first run on an AMX machine, 2026-12-04). This operand is all 64 bytes.
    asm volatile("ldtilecfg %0" : : "m"(config));
  }
  static void release() { _tile_release(); }
  // The intrinsics paste their tile operands into the instruction text (GCC), so each index is
  // spelled as a literal below.
  template <int T>
  static void zero() {
#define LATHE_TILE_ZERO(n) \
  if constexpr (T == n) _tile_zero(n);
    LATHE_FOR_EACH_TILE(LATHE_TILE_ZERO)
#undef LATHE_TILE_ZERO
  }
  template <int T>
  static void load(const void* base, int64_t stride_bytes) {
#define LATHE_TILE_LOAD(n) \
  if constexpr (T == n) _tile_loadd(n, base, stride_bytes);
    LATHE_FOR_EACH_TILE(LATHE_TILE_LOAD)
#undef LATHE_TILE_LOAD
  }
  template <int T>
  static void store(void* base, int64_t stride_bytes) {
#define LATHE_TILE_STORE(n) \
  if constexpr (T == n) _tile_stored(n, base, stride_bytes);
    LATHE_FOR_EACH_TILE(LATHE_TILE_STORE)
#undef LATHE_TILE_STORE
  }
  // The (C, A, B) triples the kernels use: a 2 x 2 block of accumulators C0-C3 from A tiles 4, 5
  // and B tiles 6, 7, and the probe's (0, 1, 2).
  template <int C, int A, int B>
  static void dpbf16ps() {
    static_assert((C == 0 && A == 4 && B == 6) || (C == 1 && A == 4 && B == 7) || (C == 2 && A == 5 && B == 6) ||
                      (C == 3 && A == 5 && B == 7) || (C == 0 && A == 1 && B == 2),
                  "add this tile triple to HardwareTiles::dpbf16ps");
    // clang-format off
#define LATHE_TILE_DP(c, a, b) if constexpr (C == c && A == a && B == b) _tile_dpbf16ps(c, a, b);
    LATHE_TILE_DP(0, 4, 6) LATHE_TILE_DP(1, 4, 7) LATHE_TILE_DP(2, 5, 6) LATHE_TILE_DP(3, 5, 7) LATHE_TILE_DP(0, 1, 2)
#undef LATHE_TILE_DP
    // clang-format on
  }
};

#endif

struct EmulatedTiles {
  struct State {
    alignas(64) uint8_t data[8][1024];
    int rows = 0, colsb = 0;
  };
  static State& state() {
    static thread_local State tiles;
    return tiles;
  }
  static void configure(int rows, int colsb) {
    state().rows = rows;
    state().colsb = colsb;
    std::memset(state().data, 0, sizeof(state().data));  // ldtilecfg zeroes the tiles
  }
  static void release() { state().rows = state().colsb = 0; }
  // A tile instruction with no configuration raises #UD on the hardware (SIGILL): the emulation
  // stops the same way, so a kernel that uses tiles outside configure() .. release() fails its
  // tests on every machine, not only on an AMX one.
  static State& configured() {
    State& s = state();
    if (s.rows == 0) {
      std::fputs("lathe: AMX tile instruction with no tile configuration (emulated #UD)\n", stderr);
      std::abort();
    }
    return s;
  }
  template <int T>
  static void zero() {
    std::memset(configured().data[T], 0, sizeof(state().data[T]));
  }
  template <int T>
  static void load(const void* base, int64_t stride_bytes) {
    State& s = configured();
    for (int r = 0; r < s.rows; ++r)
      std::memcpy(s.data[T] + 64 * r, static_cast<const uint8_t*>(base) + r * stride_bytes, s.colsb);
  }
  template <int T>
  static void store(void* base, int64_t stride_bytes) {
    State& s = configured();
    for (int r = 0; r < s.rows; ++r)
      std::memcpy(static_cast<uint8_t*>(base) + r * stride_bytes, s.data[T] + 64 * r, s.colsb);
  }
  // f32 denormals (inputs and results) become zero of the same sign.
  static float flush(float x) { return std::fabs(x) < FLT_MIN ? std::copysign(0.0f, x) : x; }
  static float bf16_input(uint16_t bits) {
    uint32_t word = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &word, 4);
    return flush(value);
  }
  // fma(a, b, c) for bf16 a, b: their product is exact in f32 unless below the normal range, where
  // a library fma keeps it exact too.
  static float fma_bf16(float a, float b, float c) {
    float product = a * b;
    if (product != 0.0f && std::fabs(product) < FLT_MIN) return flush(std::fma(a, b, c));
    return flush(product + c);
  }
  template <int C, int A, int B>
  static void dpbf16ps() {
    State& s = configured();
    const int pairs = s.colsb / 4, columns = s.colsb / 4;
    float* c = reinterpret_cast<float*>(s.data[C]);
    const uint16_t* a = reinterpret_cast<const uint16_t*>(s.data[A]);
    const uint16_t* b = reinterpret_cast<const uint16_t*>(s.data[B]);
    for (int m = 0; m < s.rows; ++m)
      for (int n = 0; n < columns; ++n) {
        float even = 0.0f, odd = 0.0f;
        for (int k = 0; k < pairs; ++k) {
          even = fma_bf16(bf16_input(a[32 * m + 2 * k]), bf16_input(b[32 * k + 2 * n]), even);
          odd = fma_bf16(bf16_input(a[32 * m + 2 * k + 1]), bf16_input(b[32 * k + 2 * n + 1]), odd);
        }
        c[16 * m + n] = flush(flush(c[16 * m + n]) + flush(even + odd));
      }
  }
};

#if LATHE_AMX_TILES
using Tiles = HardwareTiles;
#else
using Tiles = EmulatedTiles;
#endif

}  // namespace lathe::LATHE_ISA_NS::amx_tiles
