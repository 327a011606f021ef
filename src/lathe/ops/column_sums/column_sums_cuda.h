// The CUDA implementation of column_sums (column_sums_cuda.cu), registered by column_sums.cc in
// builds with the CUDA backend: one thread per column walks the rows in order in f64 (adjacent
// threads read adjacent columns: coalesced), as the CPU does, so both give the same bits.
// The kernel and host step: column_sums_cuda_kernels.cuh; their host emulation (builds with
// the CUDA toolkit): column_sums_cuda_emulated.cc, "cuda_emulated".
#pragma once

#include "lathe/ops/column_sums/column_sums.h"

namespace lathe {

Impl<ColumnSumsArgs, ColumnSumsConfig> column_sums_cuda_impl();
std::vector<Impl<ColumnSumsArgs, ColumnSumsConfig>> column_sums_cuda_emulated_impls();

}  // namespace lathe
