// gemm::transpose_bf16_rows (matmul_packing.h) as each ISA compiles it, for the tests: its vector
// blocks pack AMX's A panels, which nothing else runs off an AMX machine. A file of its own: in
// matmul_kernels.cc the extra function tipped GCC's per-file inlining budget, and the bf16 in-place
// tile's epilogue stopped inlining `activate` and spilled its accumulators (the ctest
// register_tile_spill_check caught it).
#include "lathe/core/simd.h"
// (simd.h first: it names the namespace)
#include <cstdint>

#include "lathe/ops/matmul/matmul_packing.h"

namespace lathe::LATHE_ISA_NS {

void matmul_transpose_bf16_rows(const uint16_t* src, int64_t src_stride, int64_t rows, int64_t depth, uint16_t* dest,
                                int64_t dest_stride) {
  gemm::transpose_bf16_rows(src, src_stride, rows, depth, dest, dest_stride);
}

}  // namespace lathe::LATHE_ISA_NS
