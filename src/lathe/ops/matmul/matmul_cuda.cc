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
constexpr int kAlgorithms = 4;                 // the config space: the heuristic's best four
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
int64_t row_stride_of(const TensorView& view) {
  return view.dim(-2) <= 1 ? std::max<int64_t>(1, view.dim(-1)) : view.stride(-2);
}

uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

DeviceMatrices matrices_of(const TensorView& view) {
  return {static_cast<float*>(view.data),
          view.rank() == 3 ? view.dim(0) : 1,
          view.dim(-2),
          view.dim(-1),
          row_stride_of(view),
          batch_stride_of(view)};
}

// c = op(a) @ op(b) (+ bias) (+ c when accumulate), through cuBLASLt; no activation. The row-major
// product is computed as the column-major c^T = op(b)^T op(a)^T, so b is cuBLAS's first operand.
void lt_matmul(const MatmulArgs& args, int algorithm_index) {
  const int64_t batch = args.c.rank() == 3 ? args.c.dim(0) : 1;
  const int64_t m = args.c.dim(-2), n = args.c.dim(-1);
  const int64_t k = args.trans_a ? args.a.dim(-2) : args.a.dim(-1);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: c = bias (or unchanged / zero)
    if (args.bias.data)
      return cuda_add_bias(matrices_of(args.c), static_cast<const float*>(args.bias.data), args.accumulate);
    if (!args.accumulate)
      for (int64_t t = 0; t < batch; ++t) {
        TensorView entry = args.c.rank() == 3 ? args.c.select(0, t) : args.c;
        LATHE_CUDA_CHECK(kOp, cudaMemset2DAsync(entry.data, row_stride_of(entry) * sizeof(float), 0, n * sizeof(float),
                                                m, static_cast<cudaStream_t>(cuda::stream_handle())));
      }
    return;
  }
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
  cublasLtMatmulHeuristicResult_t results[kAlgorithms] = {};
  int found = 0;
  LATHE_CUBLAS_CHECK(kOp, cuda::cublaslt().cublasLtMatmulAlgoGetHeuristic(
                              context.handle, desc, b_layout.handle, a_layout.handle, c_layout.handle, c_layout.handle,
                              preference, kAlgorithms, results, &found));
  LATHE_CHECK(found > 0, kOp, ": cuBLASLt has no algorithm for ", args.a.describe(), " @ ", args.b.describe());
  const cublasLtMatmulHeuristicResult_t& chosen = results[std::min(algorithm_index, found - 1)];
  const float alpha = 1.0f, beta = args.accumulate ? 1.0f : 0.0f;
  LATHE_CUBLAS_CHECK(
      kOp, cuda::cublaslt().cublasLtMatmul(context.handle, desc, &alpha, args.b.data, b_layout.handle, args.a.data,
                                           a_layout.handle, &beta, args.c.data, c_layout.handle, args.c.data,
                                           c_layout.handle, &chosen.algo, context.workspace.view().data,
                                           kWorkspaceBytes, static_cast<cudaStream_t>(cuda::stream_handle())));
}

void run_matmul(const MatmulArgs& args, const MatmulCpuConfig& config) {
  lt_matmul(args, static_cast<int>(config.microkernel));
  cuda_apply_activation(matrices_of(args.c), args.activation);
}

// A view of the leading batch entry of a rank-3 view (or the view itself), rank 2.
TensorView entry(const TensorView& view, int64_t t) { return view.rank() == 3 ? view.select(0, t) : view; }

void run_matmul_backward(const MatmulBackwardArgs& args, const MatmulCpuConfig& config) {
  const int64_t batch = args.dc.rank() == 3 ? args.dc.dim(0) : 1, m = args.dc.dim(-2), n = args.dc.dim(-1);
  // g = dc * act'(pre), contiguous (batch, m, n).
  Tensor g_storage = cuda::device_empty(Shape{batch, m, n}, DType::f32, "matmul_backward gradient");
  const DeviceMatrices none{nullptr, 0, 0, 0, 0, 0};
  cuda_activation_gradient(matrices_of(args.dc),
                           args.activation == Activation::none ? none : matrices_of(args.pre_activation),
                           args.activation, g_storage.ptr<float>());
  const TensorView g_full = args.dc.rank() == 3 ? g_storage.view() : g_storage.view().select(0, 0);
  // bf16 operands: g as kBf16Parts bf16 tensors (see matmul_cuda.h), each product once per part.
  const bool bf16 = args.a.dtype == DType::bf16;
  const int parts = bf16 ? kBf16Parts : 1;
  Tensor g_parts;
  if (bf16) {
    g_parts = cuda::device_empty(Shape{parts, batch, m, n}, DType::bf16, "matmul_backward gradient in bf16 parts");
    cuda_split_bf16x3(g_storage.ptr<float>(), batch * m * n, g_parts.view().data);
  }
  // Part `part` of g (all of g in f32), in g's rank; of batch entry t when shared (t >= 0).
  auto g_at = [&](int part, int64_t t) {
    TensorView g = g_full;
    if (bf16) {
      g = g_parts.view().select(0, part);
      if (args.dc.rank() != 3) g = g.select(0, 0);
    }
    return t < 0 ? g : entry(g, t);
  };
  auto product = [&](const TensorView& a, bool trans_a, const TensorView& b, bool trans_b, const TensorView& c,
                     bool accumulate) {
    MatmulArgs step;
    step.a = a;
    step.b = b;
    step.c = c;
    step.trans_a = trans_a;
    step.trans_b = trans_b;
    step.accumulate = accumulate;
    lt_matmul(step, static_cast<int>(config.microkernel));
  };
  if (args.da.data) {
    // da = g @ op(b)^T in a's layout; transposed a: da = op(b) @ g^T. Summed over the batch when a
    // is shared (a rank-2 da): batch entries accumulate in order.
    const bool shared = args.da.rank() == 2 && batch > 1;
    for (int64_t t = 0; t < (shared ? batch : 1); ++t)
      for (int part = 0; part < parts; ++part) {
        const TensorView b_t = shared ? entry(args.b, t) : args.b, g_t = g_at(part, shared ? t : -1);
        if (!args.trans_a)
          product(g_t, false, b_t, !args.trans_b, args.da, t > 0 || part > 0);
        else
          product(b_t, args.trans_b, g_t, true, args.da, t > 0 || part > 0);
      }
  }
  if (args.db.data) {
    // db = op(a)^T @ g in b's layout; transposed b: db = g^T @ op(a). Summed over the batch when
    // b is shared (a rank-2 db): batch entries accumulate in order.
    const bool shared = args.db.rank() == 2 && batch > 1;
    for (int64_t t = 0; t < (shared ? batch : 1); ++t)
      for (int part = 0; part < parts; ++part) {
        const TensorView a_t = shared ? entry(args.a, t) : args.a, g_t = g_at(part, shared ? t : -1);
        if (!args.trans_b)
          product(a_t, !args.trans_a, g_t, false, args.db, t > 0 || part > 0);
        else
          product(g_t, true, a_t, args.trans_a, args.db, t > 0 || part > 0);
      }
  }
  if (args.dbias.data) cuda_column_sums(g_storage.ptr<float>(), batch * m, n, static_cast<float*>(args.dbias.data));
  // g_storage goes back to the cache on return: work queued later on lathe's one stream runs after
  // the products above, so reusing its memory is safe without waiting.
}

std::vector<MatmulCpuConfig> algorithm_space() {
  std::vector<MatmulCpuConfig> configs;
  for (int64_t index = 0; index < kAlgorithms; ++index) {
    MatmulCpuConfig config;
    config.microkernel = index;
    configs.push_back(config);
  }
  return configs;
}

MatmulCpuConfig first_algorithm() {
  MatmulCpuConfig config;
  config.microkernel = 0;
  return config;
}

}  // namespace

Impl<MatmulArgs, MatmulCpuConfig> matmul_cuda_impl() {
  Impl<MatmulArgs, MatmulCpuConfig> impl;
  impl.name = "cuda";
  impl.device = Device::cuda;
  impl.heuristic = [](const MatmulArgs&) { return first_algorithm(); };
  impl.space = [](const MatmulArgs&) { return algorithm_space(); };
  impl.run = run_matmul;
  return impl;
}

Impl<MatmulBackwardArgs, MatmulCpuConfig> matmul_backward_cuda_impl() {
  Impl<MatmulBackwardArgs, MatmulCpuConfig> impl;
  impl.name = "cuda";
  impl.device = Device::cuda;
  impl.heuristic = [](const MatmulBackwardArgs&) { return first_algorithm(); };
  impl.space = [](const MatmulBackwardArgs&) { return algorithm_space(); };
  impl.run = run_matmul_backward;
  return impl;
}

}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
