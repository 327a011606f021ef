// What CUDA device code needs from the compiler and the hardware, for compiling it with a host
// compiler and running it under device/simt_emulation.h (builds with the CUDA toolkit: its headers
// give __nv_bfloat16 and friends on the host, and define __device__, __global__ and __align__ for
// host compilers). A kernel header includes this where __CUDACC__ is not defined; its inline PTX
// wrappers pick their emulated forms the same way. Files that include it compile with
// -Wno-unknown-pragmas (CMakeLists.txt): device code's `#pragma unroll` is nvcc's, and GCC 12
// ignores a diagnostic pragma for that warning.
#pragma once

#if defined(__CUDACC__)
#error "cuda_host_emulation.h is for host compilers; nvcc compiles the real device code"
#endif

// First, as the macros below would rename cuda_runtime.h's parameters (gridDim, blockDim).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "lathe/core/error.h"
#include "lathe/device/simt_emulation.h"

#define threadIdx (::lathe::simt::current().thread_idx)
#define blockIdx (::lathe::simt::current().block_idx)
#define blockDim (::lathe::simt::current().block_dim)
#define gridDim (::lathe::simt::current().grid_dim)

inline void __syncthreads() { ::lathe::simt::sync_block(); }

// Full-warp masks only (what lathe's kernels use).
inline float __shfl_xor_sync(unsigned mask, float value, int lane_mask) {
  LATHE_CHECK(mask == 0xffffffffu, "simt: __shfl_xor_sync with a partial mask is not emulated");
  return ::lathe::simt::shfl_xor(value, lane_mask);
}

// The device's reciprocal square root (an approximation of at most 2 ulp error there; rounded
// from the exact root here).
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
