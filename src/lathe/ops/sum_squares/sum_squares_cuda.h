// The CUDA implementation of sum_squares (sum_squares_cuda.cu), registered by sum_squares.cc in
// builds with the CUDA backend: one block per chunk of kSumSquaresChunk elements sums its squares
// in f64 (each thread a strided run, then a fixed tree over the block), and one block adds the
// chunk sums to out in chunk order. Two launches, no atomics: the same bits every run.
// The kernels and host steps: sum_squares_cuda_kernels.cuh; their host emulation (builds with
// the CUDA toolkit): sum_squares_cuda_emulated.cc, "cuda_emulated".
#pragma once

#include "lathe/ops/sum_squares/sum_squares.h"

namespace lathe {

Impl<SumSquaresArgs, SumSquaresConfig> sum_squares_cuda_impl();
std::vector<Impl<SumSquaresArgs, SumSquaresConfig>> sum_squares_cuda_emulated_impls();

}  // namespace lathe
