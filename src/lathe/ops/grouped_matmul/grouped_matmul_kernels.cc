// Grouped matmul CPU kernels on the vector paths, compiled once per ISA via
// lathe_add_isa_kernels: grouped_matmul_runs.h's work split over matmul_gemm.h's f32 path, and
// the bf16 pair path (vdpbf16ps in the AVX-512 compilation, emulated elsewhere). The last
// microkernel index (matmul_in_place_variant, as in matmul's configs) reads the rows of x (the
// forward) and of dy (dx) in place where they allow it (matmul_gemm_in_place.h), else, and for
// dw, runs the BLIS path with the same register tile.
#include "lathe/ops/grouped_matmul/grouped_matmul_runs.h"

namespace lathe::LATHE_ISA_NS {

using namespace grouped;

namespace {

using F32InPlaceTile = F32InPlace<kInPlaceMR, kInPlaceNV>;
using F32InPlaceBlis = F32Path<kInPlaceMR, kInPlaceNV>;
using Bf16InPlaceTile = Bf16InPlace<kBf16InPlaceMR, kBf16InPlaceNV>;
using Bf16InPlaceBlis = Bf16DotPath<kBf16InPlaceMR, kBf16InPlaceNV>;

bool in_place_index(const MatmulCpuConfig& config) { return config.microkernel == matmul_in_place_variant(kIsa); }

// The rows of p on InPlace where its operands allow, else on Blis (the same tile).
template <class InPlace, class Blis>
void run_rows_in_place(const RowGroupedProduct& p, const MatmulCpuConfig& config) {
  if (InPlace::applies_to(p.a, p.bt)) return run_row_grouped<InPlace>(p, config);
  run_row_grouped<Blis>(p, config);
}

template <class InPlace, class Blis>
void run_backward_in_place(const GroupedMatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  const bool dx_in_place = InPlace::applies_to(operand(args.dy, false), operand(args.w, true));
  if (dx_in_place) return run_backward<InPlace, Blis>(args, config);
  run_backward<Blis>(args, config);
}

}  // namespace

void grouped_matmul_kernel(const GroupedMatmulArgs& args, const MatmulCpuConfig& config) {
  if (in_place_index(config)) return run_rows_in_place<F32InPlaceTile, F32InPlaceBlis>(forward_product(args), config);
  with_f32_path(config, [&]<class Path>() { run_row_grouped<Path>(forward_product(args), config); });
}

void grouped_matmul_bf16_dot_kernel(const GroupedMatmulArgs& args, const MatmulCpuConfig& config) {
  if (in_place_index(config)) return run_rows_in_place<Bf16InPlaceTile, Bf16InPlaceBlis>(forward_product(args), config);
  with_bf16_dot_path(config, [&]<class Path>() { run_row_grouped<Path>(forward_product(args), config); });
}

void grouped_matmul_backward_kernel(const GroupedMatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  if (in_place_index(config)) return run_backward_in_place<F32InPlaceTile, F32InPlaceBlis>(args, config);
  with_f32_path(config, [&]<class Path>() { run_backward<Path>(args, config); });
}

void grouped_matmul_backward_bf16_dot_kernel(const GroupedMatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  if (in_place_index(config)) return run_backward_in_place<Bf16InPlaceTile, Bf16InPlaceBlis>(args, config);
  with_bf16_dot_path(config, [&]<class Path>() { run_backward<Path>(args, config); });
}

}  // namespace lathe::LATHE_ISA_NS
