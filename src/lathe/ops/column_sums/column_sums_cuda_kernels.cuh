// column_sums's CUDA kernel and the host step that launches it, shared by the GPU
// (column_sums_cuda.cu) and the host emulation (column_sums_cuda_emulated.cc); see
// device/cuda_launcher.cuh. One thread per column walks the rows in order in f64.
#pragma once

#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/column_sums/column_sums.h"

namespace lathe::column_sums_cuda {

constexpr int kThreads = 256;

// out[j] (+)= sum over rows i of x[i][j], rounded once to f32.
struct Sums {
  __device__ void operator()(unsigned char*, const float* x, int64_t rows, int64_t cols, float* out,
                             bool accumulate) const {
    const int64_t j = int64_t{blockIdx.x} * kThreads + threadIdx.x;
    if (j >= cols) return;
    double sum = 0;
    for (int64_t i = 0; i < rows; ++i) sum += x[i * cols + j];
    const float rounded = static_cast<float>(sum);
    out[j] = accumulate ? out[j] + rounded : rounded;
  }
};

template <class Launcher>
void run(const ColumnSumsArgs& args, Launcher& launcher) {
  const int64_t rows = args.x.dim(0), cols = args.x.dim(1);
  if (cols == 0) return;
  const auto blocks = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
  launcher.launch("column_sums (cuda)", dim3(blocks), kThreads, 0, Sums{}, static_cast<const float*>(args.x.data),
                  rows, cols, static_cast<float*>(args.out.data), args.accumulate);
}

}  // namespace lathe::column_sums_cuda
