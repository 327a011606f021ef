// "cuda_emulated": a CUDA kernel's own source run on the host, so its logic is tested on every
// machine (development and CI have no GPU). The kernel's per-thread work is a LATHE_HOST_DEVICE
// function in the op's *_cuda_body.h; the .cu launches it, one GPU thread per index, and the
// emulated implementation calls it for every index in order (phases of one block separated by
// __syncthreads become consecutive loops; shared memory becomes host arrays). The op registers it
// after its scalar implementation, which supports every argument, so dispatch never reaches it; the
// op-contract tests check it like any implementation (the float64 reference, every shape and
// config, reruns), and tuning and benchmarks skip it (emulated_impl.h). Its numbers are the host's
// (expf may differ from the GPU's in the last bits); what it proves is the indexing, the order of
// operations, the edge cases. The GPU's own numbers are checked by the device check.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "lathe/ops/emulated_impl.h"
#include "lathe/ops/op.h"

namespace lathe {

// `supported`: the arguments the CUDA kernel takes (the same function as the cuda implementation's).
// An op whose CUDA implementation picks among kernels by its config emulates each kernel as its own
// implementation: `kernels` names it (<kernels>_emulated) and `config` is the CUDA config that runs
// that kernel, the emulation's whole tuning space.
template <class Args, class Config>
Impl<Args, Config> cuda_emulated_impl(KernelFunction<Args, Config> run, std::function<bool(const Args&)> supported = {},
                                      const char* kernels = "cuda", Config config = Config{}) {
  Impl<Args, Config> impl;
  impl.name = str_cat(kernels, kEmulatedSuffix);
  impl.device = Device::cpu;
  impl.isa = Isa::scalar;
  impl.supported = std::move(supported);
  impl.heuristic = [config](const Args&) { return config; };
  impl.space = [config](const Args&) { return std::vector<Config>{config}; };
  impl.run = run;
  return impl;
}

// The CPU implementations, then the emulation, then (builds with the backend) the CUDA kernel.
template <class Args, class Config>
std::vector<Impl<Args, Config>> with_cuda_kernel(std::vector<Impl<Args, Config>> impls, Impl<Args, Config> emulated,
                                                 std::type_identity_t<Impl<Args, Config> (*)()> cuda_impl) {
  impls.push_back(std::move(emulated));
  return with_cuda_impl(std::move(impls), cuda_impl);
}

}  // namespace lathe
