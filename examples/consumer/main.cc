// Calls one op of an installed lathe: RMSNorm through the library's dispatch (the fastest kernel
// this CPU runs), checked against the op's float64 reference. Prints the version it linked and the
// largest difference; exits 1 when the kernel and the reference disagree.
#include <cmath>
#include <cstdio>

#include "lathe/core/cpu_features.h"
#include "lathe/core/tensor.h"
#include "lathe/core/version.h"
#include "lathe/ops/rms_norm/rms_norm.h"

int main() {
  const int64_t rows = 3, dim = 37;  // 37: not a multiple of any vector width
  lathe::Tensor x = lathe::Tensor::empty({rows, dim}, lathe::DType::f32);
  lathe::Tensor weight = lathe::Tensor::empty({dim}, lathe::DType::f32);
  for (int64_t i = 0; i < rows * dim; ++i) x.ptr<float>()[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  for (int64_t d = 0; d < dim; ++d) weight.ptr<float>()[d] = 0.5f + 0.01f * static_cast<float>(d);
  lathe::Tensor y = lathe::Tensor::empty({rows, dim}, lathe::DType::f32);
  lathe::Tensor expected = lathe::Tensor::empty({rows, dim}, lathe::DType::f32);
  lathe::Tensor inv_rms = lathe::Tensor::empty({rows}, lathe::DType::f32);

  lathe::RmsNormArgs args{x.view(), weight.view(), y.view(), inv_rms.view()};
  lathe::rms_norm(args);
  args.y = expected.view();
  lathe::rms_norm_reference<double>(args);

  double max_difference = 0;
  for (int64_t i = 0; i < rows * dim; ++i)
    max_difference = std::fmax(max_difference, std::fabs(y.ptr<float>()[i] - expected.ptr<float>()[i]));
  std::printf("%s, %s: rms_norm max |kernel - float64 reference| = %.3g\n", lathe::lathe_version_line().c_str(),
              lathe::isa_name(lathe::active_isa()), max_difference);
  return max_difference <= 1e-5 ? 0 : 1;
}
