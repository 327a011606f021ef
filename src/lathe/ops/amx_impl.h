// The two implementations an op gets from one AMX tile kernel (a *_amx_kernels.cc file, compiled
// twice by lathe_add_amx_kernels):
//   "amx": the real tile instructions (lathe::avx512::), registered first, supported where the
//     arguments are bf16 (`bf16_operands`) and core/amx.h's amx_active() holds;
//   "amx_emulated": the same source on core/amx_tiles.h's scalar emulation (lathe::scalar::),
//     registered last, after scalar, which supports every argument, so dispatch never reaches it:
//     the op-contract tests check it on every machine like any implementation, and tuning skips it
//     (emulated_impl.h).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "lathe/core/amx.h"
#include "lathe/ops/emulated_impl.h"
#include "lathe/ops/op.h"

namespace lathe {

// Declares a tile kernel's three compilations (cmake/isa_kernels.cmake, lathe_add_amx_kernels), in
// the op's baseline file beside LATHE_DECLARE_ISA_KERNEL.
#define LATHE_DECLARE_AMX_KERNEL(name, ArgsType, ConfigType) \
  namespace avx512 {                                         \
  void name(const ArgsType&, const ConfigType&);             \
  }                                                          \
  namespace scalar {                                         \
  void name(const ArgsType&, const ConfigType&);             \
  }                                                          \
  namespace avx512_emulated_tiles {                          \
  void name(const ArgsType&, const ConfigType&);             \
  }

// heuristic: the config for given arguments; space: the tuning space.
template <class Args, class Config>
Impl<Args, Config> amx_impl(bool emulated, std::function<bool(const Args&)> bf16_operands,
                            std::function<Config(const Args&)> heuristic, std::function<std::vector<Config>()> space,
                            KernelFunction<Args, Config> tile_kernel, KernelFunction<Args, Config> emulated_kernel) {
  Impl<Args, Config> impl;
  impl.name = emulated ? str_cat("amx", kEmulatedSuffix) : "amx";
  impl.isa = emulated ? Isa::scalar : Isa::avx512_bf16;
  if (emulated)
    impl.supported = std::move(bf16_operands);
  else
    impl.supported = [bf16 = std::move(bf16_operands)](const Args& args) { return bf16(args) && amx_active(); };
  impl.heuristic = std::move(heuristic);
  impl.space = [space = std::move(space)](const Args&) { return space(); };
  impl.run = emulated ? emulated_kernel : tile_kernel;
  return impl;
}

// The same with one heuristic config for every argument.
template <class Args, class Config>
Impl<Args, Config> amx_impl(bool emulated, std::function<bool(const Args&)> bf16_operands, Config heuristic,
                            std::function<std::vector<Config>()> space, KernelFunction<Args, Config> tile_kernel,
                            KernelFunction<Args, Config> emulated_kernel) {
  return amx_impl<Args, Config>(emulated, std::move(bf16_operands),
                                std::function<Config(const Args&)>([heuristic](const Args&) { return heuristic; }),
                                std::move(space), tile_kernel, emulated_kernel);
}

}  // namespace lathe
