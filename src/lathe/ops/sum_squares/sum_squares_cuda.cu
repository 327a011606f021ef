#include "lathe/device/cuda_check.h"
#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/sum_squares/sum_squares_cuda.h"

namespace lathe {
namespace {

constexpr int kThreads = 256;

// Sums a block's per-thread values in a fixed tree; thread 0 gets the total.
__device__ double block_sum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

// One block per chunk: partial[chunk] = sum of the chunk's squares.
__global__ void chunk_sums(const float* x, int64_t n, double* partial) {
  __shared__ double shared[kThreads];
  const int64_t first = int64_t{blockIdx.x} * kSumSquaresChunk;
  const int64_t last = min(n, first + kSumSquaresChunk);
  double sum = 0;
  for (int64_t i = first + threadIdx.x; i < last; i += kThreads) sum += static_cast<double>(x[i]) * x[i];
  const double total = block_sum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// One thread adds the chunk sums to out in chunk order (the CPU's order of chunks).
__global__ void add_in_order(const double* partial, int64_t chunks, double* out, bool accumulate) {
  double total = accumulate ? *out : 0.0;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) total += partial[chunk];
  *out = total;
}

void run(const SumSquaresArgs& args, const SumSquaresConfig&) {
  const int64_t n = args.x.numel(), chunks = (n + kSumSquaresChunk - 1) / kSumSquaresChunk;
  auto* out = static_cast<double*>(args.out.data);
  Tensor partial = cuda::device_empty({std::max<int64_t>(chunks, 1)}, DType::f64, "sum_squares chunk sums");
  auto* sums = static_cast<double*>(partial.view().data);
  if (chunks > 0) {
    chunk_sums<<<static_cast<unsigned>(chunks), kThreads, 0, cuda::lathe_stream()>>>(
        static_cast<const float*>(args.x.data), n, sums);
    LATHE_CUDA_CHECK_LAUNCH("sum_squares (cuda)");
  }
  add_in_order<<<1, 1, 0, cuda::lathe_stream()>>>(sums, chunks, out, args.accumulate);
  LATHE_CUDA_CHECK_LAUNCH("sum_squares (cuda)");
}

}  // namespace

Impl<SumSquaresArgs, SumSquaresConfig> sum_squares_cuda_impl() {
  return default_config_cuda_impl<SumSquaresArgs, SumSquaresConfig>(run);
}

}  // namespace lathe
