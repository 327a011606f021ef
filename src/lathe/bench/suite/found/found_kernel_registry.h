// Kernels found by `lathe optimize` and promoted into the library with `--emit` (docs/optimizer.md):
// each is a generated found_<problem>_kernels.cc in this folder, compiled for AVX2 and AVX-512
// (not the scalar ISA: there the composed path runs), listed in found_kernel_list.inc. A suite fusion problem whose name has a found kernel
// runs it as its lathe path (suite_fusion_gemm.cc); found_kernel_registry_test.cc checks every listed
// kernel against the problem's float64 reference on fresh inputs and awkward shapes.
#pragma once

#include <string>
#include <vector>

#include "lathe/bench/lab/lathe_lab.h"

namespace lathe {

// The kernel lab's C ABI without dims and thread count (the library's thread pool is used).
using FoundKernelFn = int (*)(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs);

// The found kernel of a suite problem for the active ISA; null when there is none (below AVX2,
// or $LATHE_NO_FOUND_KERNELS is set, to time the composed path).
FoundKernelFn find_found_kernel(const std::string& problem);
std::vector<std::string> found_kernel_problems();

}  // namespace lathe
