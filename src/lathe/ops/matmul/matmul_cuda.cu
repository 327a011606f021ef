// matmul's CUDA implementations: the steps of matmul_cuda_kernels.cuh launched on the GPU, their
// products in cuBLASLt (matmul_cuda.cc) with the config's algorithm.
#include "lathe/device/cuda_launcher.cuh"
#include "lathe/ops/matmul/matmul_cuda.h"
#include "lathe/ops/matmul/matmul_cuda_kernels.cuh"

namespace lathe {
namespace {

// The steps' product: cuBLASLt's algorithm `microkernel` among its best kCublasLtAlgorithms.
auto lt_product(const MatmulCpuConfig& config) {
  return
      [algorithm = static_cast<int>(config.microkernel)](const MatmulArgs& step) { cuda_lt_matmul(step, algorithm); };
}

void run_matmul(const MatmulArgs& args, const MatmulCpuConfig& config) {
  cuda::DeviceLauncher launcher;
  matmul_cuda::run_forward(args, launcher, lt_product(config));
}

void run_matmul_backward(const MatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  cuda::DeviceLauncher launcher;
  matmul_cuda::run_backward(args, launcher, lt_product(config));
}

std::vector<MatmulCpuConfig> algorithm_space() {
  std::vector<MatmulCpuConfig> configs;
  for (int64_t index = 0; index < kCublasLtAlgorithms; ++index) {
    MatmulCpuConfig config;
    config.microkernel = index;
    configs.push_back(config);
  }
  return configs;
}

MatmulCpuConfig first_algorithm() {
  MatmulCpuConfig config;
  config.microkernel = 0;
  return config;
}

template <class Args>
Impl<Args, MatmulCpuConfig> lt_impl(KernelFunction<Args, MatmulCpuConfig> run) {
  Impl<Args, MatmulCpuConfig> impl;
  impl.name = "cuda";
  impl.device = Device::cuda;
  impl.heuristic = [](const Args&) { return first_algorithm(); };
  impl.space = [](const Args&) { return algorithm_space(); };
  impl.run = run;
  return impl;
}

}  // namespace

Impl<MatmulArgs, MatmulCpuConfig> matmul_cuda_impl() { return lt_impl<MatmulArgs>(run_matmul); }

Impl<MatmulBackwardArgs, MatmulCpuConfig> matmul_backward_cuda_impl() {
  return lt_impl<MatmulBackwardArgs>(run_matmul_backward);
}

}  // namespace lathe
