// Grouped matmul on AMX tiles (bf16 operands, f32 accumulation), written once against
// core/amx_tiles.h and compiled twice (lathe_add_amx_kernels): lathe::avx512:: runs tdpbf16ps
// where core/amx.h found AMX usable, lathe::scalar:: the same code on the scalar emulation of the
// tile instructions, which the op-contract tests run on every machine. The work split is
// grouped_matmul_runs.h's, the GEMM matmul's blocked GEMM on AmxPath (matmul_amx_path.h); experts
// with few rows take the forward's unpacked vector path there, as on the vector paths.
#include "lathe/core/simd.h"
// (simd.h first: it names the namespace)
#include "lathe/core/amx_tiles.h"
#include "lathe/ops/grouped_matmul/grouped_matmul_runs.h"
#include "lathe/ops/matmul/matmul_amx_path.h"

namespace lathe::LATHE_ISA_NS {

using namespace grouped;

void grouped_matmul_amx_kernel(const GroupedMatmulArgs& args, const MatmulCpuConfig& config) {
  run_row_grouped<AmxPath>(forward_product(args), config);
}

void grouped_matmul_backward_amx_kernel(const GroupedMatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  run_backward<AmxPath>(args, config);
}

}  // namespace lathe::LATHE_ISA_NS
