// The CUDA implementation of column_sums (column_sums_cuda.cu), registered by column_sums.cc in
// builds with the CUDA backend: one thread per column walks the rows in order in f64 (adjacent
// threads read adjacent columns: coalesced), as the CPU does, so both give the same bits.
#pragma once

#include "lathe/ops/column_sums/column_sums.h"

namespace lathe {

Impl<ColumnSumsArgs, ColumnSumsConfig> column_sums_cuda_impl();

}  // namespace lathe
