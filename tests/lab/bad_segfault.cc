// Deliberately bad lab candidate: dereferences a null pointer.
#include "lathe_lab.h"

extern "C" int lathe_candidate(const LabTensor*, int, LabTensor* outputs, int, const LabDim*, int, int) {
  volatile float* nowhere = nullptr;
  *nowhere = 1.0f;
  static_cast<float*>(outputs[0].data)[0] = 0;
  return 0;
}
