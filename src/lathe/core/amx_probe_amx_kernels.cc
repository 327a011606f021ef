// The AMX probe and throughput loop of core/amx.h, written once against core/amx_tiles.h: the
// lathe::amx compilation runs the real tile instructions (only after core/amx.h obtained the
// tile-data permission), the lathe::scalar one the emulation (tests check the probe's logic).
// The tile compilation is an AVX-512 one (namespace lathe::avx512): it shares that namespace's
// inline helpers with the other AVX-512 objects, compiled from the same source with the same
// vector flags (the tile flags add no instruction to code that does not use the intrinsics).
#include "lathe/core/simd.h"
// (simd.h first: it names the namespace)
#include "lathe/core/amx_tiles.h"

namespace lathe::LATHE_ISA_NS {

// One 16 x 16 x 32 tdpbf16ps on small integers (every product and sum exact in f32), compared with
// the same sums computed in integers. False: the tiles compute something else.
bool amx_tile_probe() {
  using amx_tiles::Tiles;
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  alignas(64) float c[16 * 16];
  auto bf16_of_small_integer = [](int value) {  // exact: |value| < 256
    float f = static_cast<float>(value);
    uint32_t word;
    std::memcpy(&word, &f, 4);
    return static_cast<uint16_t>(word >> 16);
  };
  for (int i = 0; i < 16 * 32; ++i) {
    a[i] = bf16_of_small_integer(i % 7 - 3);
    b[i] = bf16_of_small_integer((5 * i) % 11 - 5);
  }
  for (int i = 0; i < 16 * 16; ++i) c[i] = static_cast<float>(i % 5);
  Tiles::configure(16, 64);
  Tiles::load<0>(c, 64);
  Tiles::load<1>(a, 64);
  Tiles::load<2>(b, 64);
  Tiles::dpbf16ps<0, 1, 2>();
  Tiles::store<0>(c, 64);
  Tiles::release();
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      int expected = (16 * m + n) % 5;
      for (int k = 0; k < 16; ++k)
        for (int h = 0; h < 2; ++h) expected += ((32 * m + 2 * k + h) % 7 - 3) * ((5 * (32 * k + 2 * n + h)) % 11 - 5);
      if (c[16 * m + n] != static_cast<float>(expected)) return false;
    }
  return true;
}

// iterations x 4 tdpbf16ps into four accumulator tiles from two A and two B tiles held in
// registers (the compute ceiling, no loads). Returns a checksum so the work is kept.
float amx_tile_throughput_loop(long iterations) {
  using amx_tiles::Tiles;
  alignas(64) uint16_t operand[16 * 32];
  alignas(64) float out[16 * 16];
  for (int i = 0; i < 16 * 32; ++i) operand[i] = 0x3c00;  // 2^-7: sums stay small
  Tiles::configure(16, 64);
  Tiles::zero<0>(), Tiles::zero<1>(), Tiles::zero<2>(), Tiles::zero<3>();
  Tiles::load<4>(operand, 64), Tiles::load<5>(operand, 64), Tiles::load<6>(operand, 64), Tiles::load<7>(operand, 64);
  for (long it = 0; it < iterations; ++it) {
    Tiles::dpbf16ps<0, 4, 6>();
    Tiles::dpbf16ps<1, 4, 7>();
    Tiles::dpbf16ps<2, 5, 6>();
    Tiles::dpbf16ps<3, 5, 7>();
  }
  Tiles::store<0>(out, 64);
  Tiles::release();
  return out[0];
}

}  // namespace lathe::LATHE_ISA_NS
