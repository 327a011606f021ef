// The implementations of an op whose CUDA kernels are launched by host steps written once
// (`<op>_cuda_kernels.cuh`: steps(args, launcher); device/cuda_launcher.cuh): the GPU's, from a
// .cu,
//   cuda_launched_impl<Args, Config>([](const Args& args, auto& launcher) { op_cuda::run(args, launcher); })
// and the host emulation's, from the op's *_cuda_emulated.cc (builds with the CUDA toolkit),
//   host_launched_impl<Args, Config>([](const Args& args, auto& launcher) { op_cuda::run(args, launcher); })
// the steps a captureless lambda (its type names it; no state travels). An emulation may pass the
// steps constants after the launcher (kOptions: the row ops' RowKernels, the head's chunk size), so
// one op registers several emulations of one set of steps.
#pragma once

#include "lathe/ops/op.h"

#if defined(__CUDACC__)
#include "lathe/device/cuda_launcher.cuh"
#else
#include <vector>

#include "lathe/device/row_cache.h"
#include "lathe/device/simt_launcher.h"
#include "lathe/ops/cuda_emulated_impl.h"
#endif

namespace lathe {

#if defined(__CUDACC__)

template <class Args, class Config, class Steps>
void run_steps_on_gpu(const Args& args, const Config&) {
  cuda::DeviceLauncher launcher;
  Steps{}(args, launcher);
}

// The op's "cuda" implementation (its config unused on the GPU, as default_config_cuda_impl).
template <class Args, class Config, class Steps>
Impl<Args, Config> cuda_launched_impl(Steps) {
  return default_config_cuda_impl<Args, Config>(&run_steps_on_gpu<Args, Config, Steps>);
}

#else

template <class Args, class Config, class Steps, auto... kOptions>
void run_steps_on_host(const Args& args, const Config&) {
  simt::HostLauncher launcher;
  Steps{}(args, launcher, kOptions...);
}

// "<kernels>_emulated" (ops/cuda_emulated_impl.h), for every argument the CUDA implementation
// takes: steps(args, launcher, kOptions...).
template <class Args, class Config, auto... kOptions, class Steps>
Impl<Args, Config> host_launched_impl(Steps, const char* kernels = "cuda") {
  return cuda_emulated_impl<Args, Config>(&run_steps_on_host<Args, Config, Steps, kOptions...>, {}, kernels);
}

// A row op's two (device/row_cache.h): "cuda_emulated", the kernels the GPU picks by the row's
// width, and "cuda_loop_emulated", its loop kernels on every shape; steps(args, launcher, RowKernels).
template <class Args, class Config, class Steps>
std::vector<Impl<Args, Config> > host_launched_row_impls(Steps steps) {
  return {host_launched_impl<Args, Config, cuda::RowKernels::by_width>(steps),
          host_launched_impl<Args, Config, cuda::RowKernels::loop>(steps, "cuda_loop")};
}

#endif

}  // namespace lathe
