// linear_cross_entropy's CUDA implementation: the kernels and host steps of
// linear_cross_entropy_cuda_kernels.cuh, launched on the GPU.
#include "lathe/ops/cuda_launched_impl.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy_cuda.h"
#include "lathe/ops/linear_cross_entropy/linear_cross_entropy_cuda_kernels.cuh"
#include "lathe/ops/matmul/matmul_cuda.h"

namespace lathe {
namespace {

static_assert(linear_cross_entropy_cuda::kGradientParts == kBf16Parts);

struct HeadLauncher : cuda::DeviceLauncher {
  void split_bf16x3(const float* x, int64_t count, void* parts) { cuda_split_bf16x3(x, count, parts); }
};

void run(const LinearCrossEntropyArgs& args, const LinearCrossEntropyCpuConfig&) {
  HeadLauncher launcher;
  linear_cross_entropy_cuda::run(args, launcher);
}

}  // namespace

Impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig> linear_cross_entropy_cuda_impl() {
  return default_config_cuda_impl<LinearCrossEntropyArgs, LinearCrossEntropyCpuConfig>(run);
}

}  // namespace lathe
