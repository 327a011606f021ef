// Deliberately bad lab candidate that games the timing: computes once, then replays the cached
// result on every later call of the same process (the checks run each in a fresh process, so they
// pass; the timed runs replay far below the roofline floor and are rejected as too fast).
#include <cstring>
#include <vector>

#include "naive_gemm_relu_scale.h"

extern "C" int lathe_candidate(const LabTensor* inputs, int, LabTensor* outputs, int, const LabDim*, int, int) {
  static std::vector<float> cached;
  const size_t count = static_cast<size_t>(outputs[0].shape[0] * outputs[0].shape[1]);
  if (cached.size() != count) {
    naive_gemm_relu_scale(inputs, outputs);
    const float* y = static_cast<const float*>(outputs[0].data);
    cached.assign(y, y + count);
  } else {
    std::memcpy(outputs[0].data, cached.data(), count * sizeof(float));
  }
  return 0;
}
