// The naive gemm_relu_scale computation the deliberately bad lab candidates start from:
//   y = max(x w^T + bias, 0) * 0.5     x: (m, k)  w: (n, k)  bias: (n)  y: (m, n)
#pragma once
#include <algorithm>

#include "lathe_lab.h"

inline void naive_gemm_relu_scale(const LabTensor* inputs, LabTensor* outputs, float scale = 0.5f) {
  const float* x = static_cast<const float*>(inputs[0].data);
  const float* w = static_cast<const float*>(inputs[1].data);
  const float* bias = static_cast<const float*>(inputs[2].data);
  float* y = static_cast<float*>(outputs[0].data);
  const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[0];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += x[i * k + p] * w[j * k + p];
      y[i * n + j] = std::max(sum + bias[j], 0.0f) * scale;
    }
}
