// Register tiles (mr rows x nr columns of C held in registers) of the matmul microkernels, per
// ISA. Shared by the baseline code (heuristics, config spaces) and the per-ISA kernels, which
// instantiate one microkernel per entry. Plain constexpr data: safe to include in kernel files.
#pragma once

#include <cstdint>

#include "lathe/core/cpu_features.h"

namespace lathe {

struct MatmulTile {
  int64_t mr, nr;
};

// Zen 5 has 32 zmm registers: 14x32 keeps 28 accumulators + 2 B vectors + 1 broadcast; 6x64 and
// 8x48 trade broadcasts for B loads.
inline constexpr MatmulTile kAvx512Tiles[] = {{14, 32}, {6, 64}, {8, 48}};
inline constexpr MatmulTile kAvx2Tiles[] = {{6, 16}, {4, 24}};
inline constexpr MatmulTile kScalarTiles[] = {{4, 4}};

inline constexpr int64_t matmul_tile_count(Isa isa, bool /*bf16_dot*/) {
  return isa >= Isa::avx512 ? 3 : isa == Isa::avx2 ? 2 : 1;
}

// The tile of a variant; out-of-range variants fall back to variant 0.
inline constexpr MatmulTile matmul_tile(Isa isa, int64_t variant, bool bf16_dot) {
  if (variant < 0 || variant >= matmul_tile_count(isa, bf16_dot)) variant = 0;
  if (isa >= Isa::avx512) return kAvx512Tiles[variant];
  if (isa == Isa::avx2) return kAvx2Tiles[variant];
  return kScalarTiles[variant];
}

// matmul's f32 GEMM with A read in place (matmul_gemm_in_place.h) is microkernel index
// matmul_in_place_variant(isa), after the BLIS tiles, in matmul's configs only (not
// grouped_matmul's): AVX-512 6 x 64, AVX2 6 x 16, scalar 4 x 4. Where A is
// not a row-major f32 matrix that index runs the BLIS path with the same tile.
inline constexpr MatmulTile matmul_in_place_tile(Isa isa) {
  return isa >= Isa::avx512 ? MatmulTile{6, 64} : isa == Isa::avx2 ? MatmulTile{6, 16} : MatmulTile{4, 4};
}
inline constexpr int64_t matmul_in_place_variant(Isa isa) { return matmul_tile_count(isa, false); }
// The same index in the bf16 pair path's configs (matmul's avx512_bf16 implementation): A (bf16,
// row-major) read in place a depth pair at a time. Its columns come in whole pairs of 16: AVX-512
// 6 x 64 (as the f32 tile), the FMA emulations AVX2 6 x 16 and scalar 4 x 16.
inline constexpr MatmulTile matmul_bf16_in_place_tile(Isa isa) {
  return isa >= Isa::avx512 ? MatmulTile{6, 64} : isa == Isa::avx2 ? MatmulTile{6, 16} : MatmulTile{4, 16};
}

}  // namespace lathe
