// What every kernel promoted by `lathe optimize --emit` (found_<problem>_kernels.cc, compiled per
// ISA) shares outside its generated part: the includes, the threads it runs on (lathe's pool), and
// the entry point found_kernel_registry.cc lists. A found kernel of the blocked form keeps its
// packing buffers per thread index between calls: one call at a time per process (the suite's).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>

#include "lathe/bench/lab/lathe_lab.h"
#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"

namespace lathe::LATHE_ISA_NS::found_support {

// Runs fn(t, count) on lathe's thread pool, or fn(0, 1) here when threads is 1.
template <class Fn>
void run_threads(int threads, Fn fn) {
  if (threads == 1) return fn(0, 1);
  lathe::parallel_run([&](int t, int count) { fn(t, count); });
}

}  // namespace lathe::LATHE_ISA_NS::found_support

// Defines lathe::LATHE_ISA_NS::found_<problem> over the kernel in namespace generated_<problem>.
#define LATHE_DEFINE_FOUND_KERNEL(problem)                                                              \
  namespace lathe::LATHE_ISA_NS {                                                                       \
  int found_##problem(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs) {       \
    return generated_##problem::run_kernel(inputs, n_inputs, outputs, n_outputs, lathe::num_threads()); \
  }                                                                                                     \
  }
