// Grouped matmul CPU kernels on the vector paths, compiled once per ISA via
// lathe_add_isa_kernels: grouped_matmul_runs.h's work split over matmul_gemm.h's f32 path, and
// the bf16 pair path (vdpbf16ps in the AVX-512 compilation, emulated elsewhere).
#include "lathe/ops/grouped_matmul/grouped_matmul_runs.h"

namespace lathe::LATHE_ISA_NS {

using namespace grouped;

void grouped_matmul_kernel(const GroupedMatmulArgs& args, const MatmulCpuConfig& config) {
  with_f32_path(config, [&]<class Path>() { run_row_grouped<Path>(forward_product(args), config); });
}

void grouped_matmul_bf16_dot_kernel(const GroupedMatmulArgs& args, const MatmulCpuConfig& config) {
  with_bf16_dot_path(config, [&]<class Path>() { run_row_grouped<Path>(forward_product(args), config); });
}

void grouped_matmul_backward_kernel(const GroupedMatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  with_f32_path(config, [&]<class Path>() { run_backward<Path>(args, config); });
}

void grouped_matmul_backward_bf16_dot_kernel(const GroupedMatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  with_bf16_dot_path(config, [&]<class Path>() { run_backward<Path>(args, config); });
}

}  // namespace lathe::LATHE_ISA_NS
