// Deliberately bad lab candidate: right values, plus one element written past the end of y.
#include "naive_gemm_relu_scale.h"

extern "C" int lathe_candidate(const LabTensor* inputs, int, LabTensor* outputs, int, const LabDim*, int, int) {
  naive_gemm_relu_scale(inputs, outputs);
  float* y = static_cast<float*>(outputs[0].data);
  volatile int64_t count = outputs[0].shape[0] * outputs[0].shape[1];
  y[count] = 0.0f;
  return 0;
}
