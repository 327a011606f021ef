// Deliberately bad lab candidate: scales by 0.6 instead of 0.5 (finite, plausible, wrong).
#include "naive_gemm_relu_scale.h"

extern "C" int lathe_candidate(const LabTensor* inputs, int, LabTensor* outputs, int, const LabDim*, int, int) {
  naive_gemm_relu_scale(inputs, outputs, 0.6f);
  return 0;
}
