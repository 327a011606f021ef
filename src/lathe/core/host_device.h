// LATHE_HOST_DEVICE marks small inline functions that both host code and CUDA kernels call (one
// definition of, e.g., which keys a query may attend to); it is empty outside nvcc.
#pragma once

#if defined(__CUDACC__)
#define LATHE_HOST_DEVICE __host__ __device__
#else
#define LATHE_HOST_DEVICE
#endif

#include <cstdint>

namespace lathe {

// counter += 1, atomically on the GPU; a plain increment on the host (kernel bodies run there by
// "cuda_emulated" implementations go one thread at a time). Integer sums: the same result in any order.
LATHE_HOST_DEVICE inline void atomic_increment(int32_t* counter) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<int*>(counter), 1);
#else
  ++*counter;
#endif
}

}  // namespace lathe
