#include "lathe/ops/matmul/matmul_cuda.h"

#if LATHE_HAVE_CUDA

#include <algorithm>
#include <mutex>

#include "lathe/device/cublaslt.h"
#include "lathe/device/cuda_check.h"
#include "lathe/device/device_tensor.h"
#include "lathe/device/stream.h"

namespace lathe {
namespace {

constexpr const char* kOp = "matmul (cuda)";
constexpr int64_t kWorkspaceBytes = 32 << 20;  // cuBLAS's own recommendation for Hopper

struct Lt {
  cublasLtHandle_t handle = nullptr;
  Tensor workspace;
};

Lt& lt() {
  static Lt instance = [] {
    Lt created;
    LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtCreate(&created.handle));
    created.workspace = cuda::device_empty({kWorkspaceBytes}, DType::u8, "cuBLASLt workspace");
    return created;
  }();
  return instance;
}

template <class T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
}

// A row-major operand (rows, cols) with row stride ld, batched, seen column-major as cuBLAS does:
// (cols, rows) with leading dimension ld.
struct Layout {
  cublasLtMatrixLayout_t handle = nullptr;
  Layout(cudaDataType type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t batch_stride) {
    LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtMatrixLayoutCreate(&handle, type, static_cast<uint64_t>(cols),
                                                                        static_cast<uint64_t>(rows), ld));
    const int32_t count = static_cast<int32_t>(batch);
    LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtMatrixLayoutSetAttribute(
                                handle, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    LATHE_CUBLAS_CHECK(
        kOp, cuda::cublaslt().cublasLtMatrixLayoutSetAttribute(handle, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                               &batch_stride, sizeof batch_stride));
  }
  ~Layout() { cuda::cublaslt().cublasLtMatrixLayoutDestroy(handle); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

int64_t batch_stride_of(const TensorView& view) { return view.rank() == 3 ? view.stride(0) : 0; }
using matmul_cuda::row_stride_of;

uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace

// The row-major product is computed as the column-major c^T = op(b)^T op(a)^T, so b is cuBLAS's
// first operand.
void cuda_lt_matmul(const MatmulArgs& args, int algorithm_index) {
  const int64_t batch = args.c.rank() == 3 ? args.c.dim(0) : 1;
  const int64_t m = args.c.dim(-2), n = args.c.dim(-1);
  const int64_t k = args.trans_a ? args.a.dim(-2) : args.a.dim(-1);
  LATHE_CHECK(m > 0 && n > 0 && k > 0, kOp, ": cuBLASLt product of an empty shape (the steps handle those)");
  const cudaDataType input_type = args.a.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasLtMatmulDesc_t desc = nullptr;
  LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  struct DescGuard {
    cublasLtMatmulDesc_t desc;
    ~DescGuard() { cuda::cublaslt().cublasLtMatmulDescDestroy(desc); }
  } desc_guard{desc};
  set(desc, CUBLASLT_MATMUL_DESC_TRANSA, args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(desc, CUBLASLT_MATMUL_DESC_TRANSB, args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (args.bias.data) {
    set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, args.bias.data);
    set(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F);
  }
  // Stored shapes: b is (k, n) or (n, k) when transposed; a is (m, k) or (k, m).
  const Layout b_layout(input_type, args.trans_b ? n : k, args.trans_b ? k : n, row_stride_of(args.b), batch,
                        batch_stride_of(args.b));
  const Layout a_layout(input_type, args.trans_a ? k : m, args.trans_a ? m : k, row_stride_of(args.a), batch,
                        batch_stride_of(args.a));
  const Layout c_layout(CUDA_R_32F, m, n, row_stride_of(args.c), batch, batch_stride_of(args.c));

  cublasLtMatmulPreference_t preference = nullptr;
  LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtMatmulPreferenceCreate(&preference));
  struct PreferenceGuard {
    cublasLtMatmulPreference_t preference;
    ~PreferenceGuard() { cuda::cublaslt().cublasLtMatmulPreferenceDestroy(preference); }
  } preference_guard{preference};
  const uint64_t workspace = kWorkspaceBytes;
  LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtMatmulPreferenceSetAttribute(
                              preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, args.b.data},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, args.a.data},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, args.c.data},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, args.c.data}};
  for (const auto& [attribute, pointer] : alignments) {
    const uint32_t alignment = alignment_of(pointer);
    LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment,
                                                                                  sizeof alignment));
  }
  Lt& context = lt();
  cublasLtMatmulHeuristicResult_t results[kCublasLtAlgorithms] = {};
  int found = 0;
  LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtMatmulAlgoGetHeuristic(
                              context.handle, desc, b_layout.handle, a_layout.handle, c_layout.handle, c_layout.handle,
                              preference, kCublasLtAlgorithms, results, &found));
  LATHE_CHECK(found > 0, kOp, ": cuBLASLt has no algorithm for ", args.a.describe(), " @ ", args.b.describe());
  const cublasLtMatmulHeuristicResult_t& chosen = results[std::min(algorithm_index, found - 1)];
  const float alpha = 1.0f, beta = args.accumulate ? 1.0f : 0.0f;
  LATHE_CUBLAS_CHECK(
      kOp, cuda::cublaslt().cublasLtMatmul(context.handle, desc, &alpha, args.b.data, b_layout.handle, args.a.data,
                                           a_layout.handle, &beta, args.c.data, c_layout.handle, args.c.data,
                                           c_layout.handle, &chosen.algo, context.workspace.view().data,
                                           kWorkspaceBytes, static_cast<cudaStream_t>(cuda::stream_handle())));
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
