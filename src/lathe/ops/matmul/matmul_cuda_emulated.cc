// matmul's CUDA steps run on the host (matmul_cuda_kernels.cuh under device/simt_launcher.h): its
// own kernels emulated, the products (cuBLASLt's on the GPU) in the CPU's matmul. "cuda_emulated"
// for matmul and matmul_backward, registered after the CPU implementations in builds with the
// CUDA toolkit.
#include "lathe/ops/matmul/matmul_cuda.h"

#if LATHE_HAVE_CUDA

#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/matmul/matmul_cuda_kernels.cuh"

namespace lathe {
namespace {

// The product the GPU takes from cuBLASLt, from the best CPU implementation (dispatch never
// reaches the emulations, so this does not come back here).
void cpu_product(const MatmulArgs& step) { matmul(step); }

}  // namespace

std::vector<Impl<MatmulArgs, MatmulCpuConfig>> matmul_cuda_emulated_impls() {
  return {host_launched_impl<MatmulArgs, MatmulCpuConfig, &cpu_product>(
      [](const MatmulArgs& args, auto& launcher, auto product) { matmul_cuda::run_forward(args, launcher, product); })};
}

std::vector<Impl<MatmulBackwardArgs, MatmulCpuConfig>> matmul_backward_cuda_emulated_impls() {
  return {host_launched_impl<MatmulBackwardArgs, MatmulCpuConfig, &cpu_product>(
      [](const MatmulBackwardArgs& args, auto& launcher, auto product) {
        matmul_cuda::run_backward(args, launcher, product);
      })};
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
