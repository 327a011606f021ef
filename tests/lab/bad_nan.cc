// Deliberately bad lab candidate: right values except one NaN.
#include <cmath>

#include "naive_gemm_relu_scale.h"

extern "C" int lathe_candidate(const LabTensor* inputs, int, LabTensor* outputs, int, const LabDim*, int, int) {
  naive_gemm_relu_scale(inputs, outputs);
  static_cast<float*>(outputs[0].data)[outputs[0].shape[1] / 2] = std::nanf("");
  return 0;
}
