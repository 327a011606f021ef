// The table of found kernels (found_kernel_registry.h). Compiled once, for the baseline ISA; the
// kernels it lists are the per-ISA objects (hence not named *_kernels.cc, which the build compiles
// three times).
#include "lathe/bench/suite/found/found_kernel_registry.h"

#include <cstdlib>

#include "lathe/core/cpu_features.h"

#define LATHE_FOUND_KERNEL(problem)                            \
  namespace lathe::avx2 {                                      \
  int found_##problem(const LabTensor*, int, LabTensor*, int); \
  }                                                            \
  namespace lathe::avx512 {                                    \
  int found_##problem(const LabTensor*, int, LabTensor*, int); \
  }
#include "lathe/bench/suite/found/found_kernel_list.inc"
#undef LATHE_FOUND_KERNEL

namespace lathe {

namespace {

struct FoundKernel {
  const char* problem;
  FoundKernelFn per_isa[3];  // scalar (none: not compiled, cmake/isa_kernels.cmake), avx2, avx512
};

const FoundKernel kFoundKernels[] = {
#define LATHE_FOUND_KERNEL(problem) \
  {#problem, {nullptr, avx2::found_##problem, avx512::found_##problem}},
#include "lathe/bench/suite/found/found_kernel_list.inc"
#undef LATHE_FOUND_KERNEL
    {nullptr, {nullptr, nullptr, nullptr}}};

}  // namespace

FoundKernelFn find_found_kernel(const std::string& problem) {
  if (const char* off = std::getenv("LATHE_NO_FOUND_KERNELS"); off && *off) return nullptr;
  Isa isa = active_isa();
  int level = isa >= Isa::avx512 ? 2 : isa >= Isa::avx2 ? 1 : 0;
  for (const auto& kernel : kFoundKernels)
    if (kernel.problem && problem == kernel.problem) return kernel.per_isa[level];
  return nullptr;
}

std::vector<std::string> found_kernel_problems() {
  std::vector<std::string> names;
  for (const auto& kernel : kFoundKernels)
    if (kernel.problem) names.push_back(kernel.problem);
  return names;
}

}  // namespace lathe
