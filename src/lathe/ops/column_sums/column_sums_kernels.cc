// column_sums CPU kernel, compiled once per ISA (scalar, avx2, avx512): threads own blocks of
// columns; within a block every row is read in order and added to one f64 sum per column (the
// compiler vectorises across the columns, which keeps each column's order), then rounded to f32.
// The bits do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/column_sums/column_sums.h"

namespace lathe::LATHE_ISA_NS {

void column_sums_kernel(const ColumnSumsArgs& args, const ColumnSumsConfig&) {
  constexpr int64_t kColumnsPerTask = 256;  // 2 KB of f64 sums: stays in L1 across the rows
  const float* x = static_cast<const float*>(args.x.data);
  float* out = static_cast<float*>(args.out.data);
  const int64_t rows = args.x.dim(0), cols = args.x.dim(1);
  parallel_for(cols, kColumnsPerTask, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; block += kColumnsPerTask) {
      const int64_t width = std::min(kColumnsPerTask, end - block);
      double sums[kColumnsPerTask] = {};
      for (int64_t i = 0; i < rows; ++i) {
        const float* row = x + i * cols + block;
        for (int64_t j = 0; j < width; ++j) sums[j] += row[j];
      }
      for (int64_t j = 0; j < width; ++j) {
        const float sum = static_cast<float>(sums[j]);
        out[block + j] = args.accumulate ? out[block + j] + sum : sum;
      }
    }
  });
}

}  // namespace lathe::LATHE_ISA_NS
