// Vendor baselines for the suite, in the same process: OpenBLAS / oneDNN sgemm, and a oneDNN
// matmul primitive with bias and post-ops (the fair baseline for GEMM + epilogue fusions).
// Availability depends on the build (LATHE_HAVE_ONEDNN / LATHE_HAVE_OPENBLAS); a problem asks
// before offering a vendor row. All matrices are row-major f32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lathe {

enum class GemmVendor { none, onednn, openblas };
GemmVendor best_gemm_vendor();  // oneDNN when built in, else OpenBLAS, else none
const char* gemm_vendor_name(GemmVendor vendor);

// c (m, n) = alpha * a (m, k) @ op(b) + beta * c, op(b) = b (k, n), or b (n, k) transposed when
// trans_b. lda / ldb / ldc are row strides in elements.
void vendor_sgemm(GemmVendor vendor, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

bool onednn_available();

// One post-op of a oneDNN matmul, applied in order after the bias:
//   eltwise: c = scale * f(c; alpha, beta), f one of relu, gelu_tanh, gelu_erf, swish, mish, tanh,
//            clip, linear, logistic, hardswish, elu, soft_relu, exp, square, abs
//   add_matrix / multiply_matrix: c = c (op) t, t (m, n)
//   add_row / multiply_row:       c = c (op) t, t (n) broadcast over rows
struct OnednnPostOp {
  enum class Kind { eltwise, add_matrix, multiply_matrix, add_row, multiply_row };
  Kind kind = Kind::eltwise;
  std::string algorithm;  // eltwise only
  float alpha = 0, beta = 0, scale = 1;
};

// c (m, n) = post_ops(a (m, k) @ op(b) + bias (n)); op(b) = b (k, n) or b (n, k) transposed. The
// primitive is created once; run() only binds pointers. Throws lathe::Error when oneDNN is absent
// or rejects the post-ops.
class OnednnFusedMatmul {
 public:
  OnednnFusedMatmul(int64_t m, int64_t n, int64_t k, bool trans_b, bool has_bias, std::vector<OnednnPostOp> post_ops);
  ~OnednnFusedMatmul();
  // binary: one pointer per add/multiply post-op, in post-op order.
  void run(const float* a, const float* b, const float* bias, float* c, const std::vector<const float*>& binary);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace lathe
