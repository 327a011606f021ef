// How the CUDA row kernels (rms_norm, softmax and their backwards; one block of threads per row)
// keep a row in registers: each thread holds `per_thread` elements (threadIdx.x + i * threads), so
// the row is read from device memory once and written once, where the loop kernels read it two or
// three times (the first H200 run measured them at 0.61x and 0.49x of a device copy: the extra
// reads). Plain C++ so the choice is tested on every machine.
#pragma once

#include <cstdint>

namespace lathe::cuda {

// The widths compiled (powers of two up to this); wider rows run the loop kernels.
inline constexpr int kRowCacheMaxPerThread = 32;

// The smallest compiled width that holds a row of `dim` elements on `threads` threads, or 0 when
// none does (dim > threads * kRowCacheMaxPerThread).
constexpr int row_cache_per_thread(int64_t dim, int threads) {
  for (int width = 1; width <= kRowCacheMaxPerThread; width *= 2)
    if (dim <= int64_t{width} * threads) return width;
  return 0;
}

// Which kernels a row op's host steps launch: the GPU's choice by the row's width, or the loop
// kernels at any width (what the GPU runs for rows wider than threads * kRowCacheMaxPerThread: one
// or two edge shapes of the op contract; the host emulation runs them on every shape as an
// implementation of their own).
enum class RowKernels { by_width, loop };

// Calls launch.template operator()<K>() with K = row_cache_per_thread(dim, threads) (0 included).
template <class Launch>
void with_row_cache_width(int64_t dim, int threads, Launch&& launch) {
  switch (row_cache_per_thread(dim, threads)) {
    case 1:
      return launch.template operator()<1>();
    case 2:
      return launch.template operator()<2>();
    case 4:
      return launch.template operator()<4>();
    case 8:
      return launch.template operator()<8>();
    case 16:
      return launch.template operator()<16>();
    case 32:
      return launch.template operator()<32>();
    default:
      return launch.template operator()<0>();
  }
}

// A row op's kernel for rows of `dim` elements on `threads` threads: launch(Loop{}) where the row
// does not fit the registers (or for RowKernels::loop), else launch(Cached<K>{}) with K elements a
// thread.
template <class Loop, template <int> class Cached, class Launch>
void with_row_kernel(int64_t dim, int threads, RowKernels kernels, Launch&& launch) {
  if (kernels == RowKernels::loop) return launch(Loop{});
  with_row_cache_width(dim, threads, [&]<int K>() {
    if constexpr (K == 0)
      launch(Loop{});
    else
      launch(Cached<K>{});
  });
}

}  // namespace lathe::cuda
