// sum_squares's CUDA kernels and the host steps that launch them, shared by the GPU
// (sum_squares_cuda.cu) and the host emulation (sum_squares_cuda_emulated.cc); see
// device/cuda_launcher.cuh. One block per chunk of kSumSquaresChunk elements sums its squares in
// f64 (each thread a strided run, then a fixed tree over the block); one thread adds the chunk
// sums to out in chunk order (the CPU's order of chunks).
#pragma once

#include <algorithm>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/sum_squares/sum_squares.h"

namespace lathe::sum_squares_cuda {

constexpr int kThreads = 256;
constexpr size_t kTreeBytes = kThreads * sizeof(double);

// Sums a block's per-thread values in a fixed tree (`shared`: kThreads doubles); thread 0 gets the total.
__device__ inline double block_sum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

// Block c: partial[c] = the sum of chunk c's squares.
struct ChunkSums {
  __device__ void operator()(unsigned char* shared, const float* x, int64_t n, double* partial) const {
    const int64_t first = int64_t{blockIdx.x} * kSumSquaresChunk;
    const int64_t last = n < first + kSumSquaresChunk ? n : first + kSumSquaresChunk;
    double sum = 0;
    for (int64_t i = first + threadIdx.x; i < last; i += kThreads) sum += static_cast<double>(x[i]) * x[i];
    const double total = block_sum(sum, reinterpret_cast<double*>(shared));
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
  }
};

// One thread: out (+)= the chunk sums in chunk order.
struct AddInOrder {
  __device__ void operator()(unsigned char*, const double* partial, int64_t chunks, double* out,
                             bool accumulate) const {
    double total = accumulate ? *out : 0.0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) total += partial[chunk];
    *out = total;
  }
};

template <class Launcher>
void run(const SumSquaresArgs& args, Launcher& launcher) {
  const int64_t n = args.x.numel(), chunks = (n + kSumSquaresChunk - 1) / kSumSquaresChunk;
  Tensor partial = launcher.scratch({std::max<int64_t>(chunks, 1)}, DType::f64, "sum_squares chunk sums");
  auto* sums = partial.ptr<double>();
  if (chunks > 0)
    launcher.launch("sum_squares (cuda)", dim3(static_cast<unsigned>(chunks)), kThreads, kTreeBytes, ChunkSums{},
                    static_cast<const float*>(args.x.data), n, sums);
  launcher.launch("sum_squares (cuda)", dim3(1), 1, 0, AddInOrder{}, static_cast<const double*>(sums), chunks,
                  static_cast<double*>(args.out.data), args.accumulate);
}

}  // namespace lathe::sum_squares_cuda
