// Deliberately bad lab candidate: does not compile (an undeclared name).
#include "lathe_lab.h"

extern "C" int lathe_candidate(const LabTensor* inputs, int, LabTensor* outputs, int, const LabDim*, int, int) {
  float* y = static_cast<float*>(outputs[0].data);
  y[0] = undeclared_value + inputs[0].shape[0];
  return 0;
}
