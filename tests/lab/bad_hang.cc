// Deliberately bad lab candidate: never returns.
#include "lathe_lab.h"

extern "C" int lathe_candidate(const LabTensor*, int, LabTensor*, int, const LabDim*, int, int) {
  volatile unsigned long spin = 0;
  while (true) spin = spin + 1;
  return 0;
}
