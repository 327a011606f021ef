// Deliberately bad lab candidate: reports failure (returns non-zero).
#include "lathe_lab.h"

extern "C" int lathe_candidate(const LabTensor*, int, LabTensor*, int, const LabDim*, int, int) { return 3; }
