// bf16 matmul on AMX tiles, written once against core/amx_tiles.h and compiled twice
// (lathe_add_amx_kernels): lathe::avx512::matmul_amx_kernel runs tdpbf16ps where core/amx.h found
// AMX usable; lathe::scalar::matmul_amx_kernel runs the same code on the scalar emulation of the
// tile instructions, so the op-contract tests check the layouts, blocking and epilogues on any
// machine. The kernel is matmul_gemm.h's blocked GEMM on AmxPath (matmul_amx_path.h).
#include "lathe/core/simd.h"
// (simd.h first: it names the namespace)
#include "lathe/core/amx_tiles.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/matmul/matmul_amx_path.h"

namespace lathe::LATHE_ISA_NS {

// config.microkernel: 0 packs A (AmxPath), 1 reads a row-major A in place (AmxInPlaceAPath).
void matmul_amx_kernel(const MatmulArgs& args, const MatmulCpuConfig& config) {
  if (config.microkernel == 1)
    gemm::run_gemm<gemm::AmxInPlaceAPath>(gemm::matmul_forward_gemm(args), config);
  else
    gemm::run_gemm<gemm::AmxPath>(gemm::matmul_forward_gemm(args), config);
}

}  // namespace lathe::LATHE_ISA_NS
