// The host emulation's launcher for an op's kernels (see device/cuda_launcher.cuh for the
// contract): each launch runs the block function as every thread of every block of the grid under
// device/simt_emulation.h, with `shared_bytes` of emulated shared memory a block (NaN-filled,
// guarded), one launch after another as on lathe's stream; scratch buffers are host tensors. For
// device code compiled by the host compiler (an op's *_cuda_emulated.cc), in builds with the CUDA
// toolkit.
#pragma once

#include <cuda_runtime.h>

#include <cstring>
#include <functional>
#include <string>

#include "lathe/core/tensor.h"
#include "lathe/device/simt_emulation.h"

namespace lathe::simt {

// simt::launch over a CUDA grid, blocks of `threads` threads.
inline void launch_grid(dim3 grid, unsigned threads, size_t shared_bytes,
                        const std::function<void(unsigned char* shared)>& block) {
  simt::launch({grid.x, grid.y, grid.z}, {threads, 1, 1}, shared_bytes, block);
}

struct HostLauncher {
  template <class Body, class... KernelArgs>
  void launch(const char*, dim3 grid, unsigned threads, size_t shared_bytes, Body body, KernelArgs... args) {
    launch_grid(grid, threads, shared_bytes, [&](unsigned char* shared) { body(shared, args...); });
  }
  void fill_zero(const char*, void* data, size_t bytes) { std::memset(data, 0, bytes); }
  Tensor scratch(const Shape& shape, DType dtype, const std::string&) { return Tensor::empty(shape, dtype); }
};

}  // namespace lathe::simt
