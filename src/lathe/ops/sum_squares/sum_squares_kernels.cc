// sum_squares CPU kernel, compiled once per ISA (scalar, avx2, avx512): fixed chunks of
// kSumSquaresChunk elements over the threads, each summed in 8 f64 running sums (one chain of
// dependent double adds would run at the add latency: ~10 ms a step for 18M gradients), the chunk
// sums then added to out in chunk order, so the bits do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "lathe/core/parallel.h"
#include "lathe/core/simd.h"
#include "lathe/ops/sum_squares/sum_squares.h"

namespace lathe::LATHE_ISA_NS {

void sum_squares_kernel(const SumSquaresArgs& args, const SumSquaresConfig&) {
  constexpr int64_t kLanes = 8;
  const float* x = static_cast<const float*>(args.x.data);
  const int64_t n = args.x.numel(), chunks = (n + kSumSquaresChunk - 1) / kSumSquaresChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first = chunk * kSumSquaresChunk, last = std::min(n, first + kSumSquaresChunk);
      double lanes[kLanes] = {};
      int64_t i = first;
      for (; i + kLanes <= last; i += kLanes)
        for (int64_t lane = 0; lane < kLanes; ++lane) lanes[lane] += static_cast<double>(x[i + lane]) * x[i + lane];
      for (; i < last; ++i) lanes[(i - first) % kLanes] += static_cast<double>(x[i]) * x[i];
      double sum = 0;
      for (double lane : lanes) sum += lane;
      partial[chunk] = sum;
    }
  });
  double* out = static_cast<double*>(args.out.data);
  double total = args.accumulate ? *out : 0.0;
  for (double value : partial) total += value;
  *out = total;
}

}  // namespace lathe::LATHE_ISA_NS
