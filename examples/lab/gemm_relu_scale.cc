// A `lathe lab` candidate for the suite problem gemm_relu_scale (docs/kernel_lab.md):
//   y = max(x w^T + bias, 0) * 0.5     x: (m, k)  w: (n, k)  bias: (n)  y: (m, n)
// nn.Linear followed by ReLU and a scale, fused: each tile of y is accumulated in registers/L1 and
// the epilogue (bias, ReLU, scale) is applied before it is stored, so y is written once.
//   lathe lab --problem gemm_relu_scale examples/lab/gemm_relu_scale.cc
#include <algorithm>
#include <thread>
#include <vector>

#include "lathe_lab.h"

namespace {

constexpr int64_t kRows = 4;       // rows of y per tile
constexpr int64_t kColumns = 256;  // columns of y per tile: kRows x kColumns floats stay in L1

// Runs fn(begin, end) over [0, count) split into `threads` contiguous chunks, one thread each.
template <class Fn>
void parallel_chunks(int64_t count, int threads, Fn fn) {
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, count)));
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back([=] { fn(count * t / threads, count * (t + 1) / threads); });
  fn(0, count / threads);
  for (auto& worker : workers) worker.join();
}

}  // namespace

extern "C" int lathe_candidate(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs,
                               const LabDim* dims, int n_dims, int threads) {
  (void)dims, (void)n_dims;
  if (n_inputs != 3 || n_outputs != 1 || inputs[0].dtype != LAB_F32) return 1;
  const float* x = static_cast<const float*>(inputs[0].data);
  const float* w = static_cast<const float*>(inputs[1].data);
  const float* bias = static_cast<const float*>(inputs[2].data);
  float* y = static_cast<float*>(outputs[0].data);
  const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[0];

  // w^T: (k, n), so the innermost loop runs along contiguous columns of y and vectorizes.
  std::vector<float> wt(static_cast<size_t>(k * n));
  parallel_chunks(n, threads, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j)
      for (int64_t p = 0; p < k; ++p) wt[p * n + j] = w[j * k + p];
  });
  // Tiles of kRows x kColumns of y, split over threads by row blocks.
  const int64_t row_blocks = (m + kRows - 1) / kRows;
  parallel_chunks(row_blocks, threads, [&](int64_t begin, int64_t end) {
    alignas(64) float tile[kRows][kColumns];
    for (int64_t block = begin; block < end; ++block) {
      const int64_t i0 = block * kRows, rows = std::min(kRows, m - i0);
      for (int64_t j0 = 0; j0 < n; j0 += kColumns) {
        const int64_t columns = std::min(kColumns, n - j0);
        for (int64_t r = 0; r < kRows; ++r)
          for (int64_t c = 0; c < kColumns; ++c) tile[r][c] = 0.0f;
        for (int64_t p = 0; p < k; ++p) {
          const float* wt_row = wt.data() + p * n + j0;
          for (int64_t r = 0; r < rows; ++r) {
            const float xv = x[(i0 + r) * k + p];
            for (int64_t c = 0; c < columns; ++c) tile[r][c] += xv * wt_row[c];
          }
        }
        // The epilogue, fused into the store: bias, ReLU, scale.
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < columns; ++c)
            y[(i0 + r) * n + j0 + c] = std::max(tile[r][c] + bias[j0 + c], 0.0f) * 0.5f;
      }
    }
  });
  return 0;
}
