// The CUDA device layer as every machine sees it. Without a usable GPU (no CUDA in the build, or
// none on the machine): the status says why, and every device entry is one clear error. With one:
// copies between host and device keep values and layouts, and device tensors are refused by host
// element access. Dispatch of device tensors: tests/unit/device_dispatch_test.cc; the ops' device
// paths: the op contract tests (each op's "cuda" implementation, wherever a GPU is usable).
#include "lathe/device/cuda_runtime.h"

#include <gtest/gtest.h>

#include <utility>

#include "expect_error.h"
#include "lathe/core/rng.h"
#include "lathe/device/device_tensor.h"
#include "lathe/device/row_cache.h"
#if LATHE_HAVE_CUDA
#include "lathe/device/cublaslt.h"
#endif

namespace lathe::cuda {
namespace {

TEST(CudaRuntime, StatusLineSaysWhetherCompiledAndWhyNoDevice) {
  const std::string line = status_line();
  if (!compiled()) {
    EXPECT_EQ(line.rfind("not compiled", 0), 0u) << line;
    EXPECT_FALSE(available());
  } else if (!available()) {
    EXPECT_EQ(line.rfind("compiled (CUDA " + toolkit_version() + "), no device: ", 0), 0u) << line;
    EXPECT_FALSE(unavailable_reason().empty());
    EXPECT_EQ(minimum_compute_capability(), 90);
  } else {
    EXPECT_NE(line.find(devices().front().name), std::string::npos) << line;
    EXPECT_TRUE(unavailable_reason().empty());
  }
}

TEST(CudaRuntime, WithoutADeviceEveryEntryIsOneClearError) {
  if (available()) GTEST_SKIP() << "a CUDA device is usable here: " << status_line();
  expect_error([&] { require_available("train.device=cuda"); }, "train.device=cuda: no usable CUDA device: ");
  expect_error([&] { device_empty({4}, DType::f32); }, "no usable CUDA device");
  Tensor host = Tensor::zeros({2, 2}, DType::f32);
  expect_error([&] { to_device(host); }, "no usable CUDA device");
}

// The layout copy() hands cudaMemcpy2DAsync, checked on every machine: rows, their width and the
// pitch between them, each from its own field (the first GPU run found the rows count written over
// the width: every 1-D copy got a pitch of one element and CUDA refused it).
TEST(CudaRuntime, RowLayoutOfEachViewKind) {
  auto expect_layout = [](const TensorView& view, int64_t rows, int64_t cols, int64_t pitch) {
    const std::optional<RowLayout> layout = row_layout(view);
    ASSERT_TRUE(layout.has_value()) << view.describe();
    EXPECT_EQ(layout->rows, rows) << view.describe();
    EXPECT_EQ(layout->cols, cols) << view.describe();
    EXPECT_EQ(layout->pitch, pitch) << view.describe();
  };
  Tensor vector = Tensor::zeros({4096}, DType::f32);
  expect_layout(vector.view(), 1, 4096, 4096);
  Tensor tall = Tensor::zeros({12, 5}, DType::f32), wide = Tensor::zeros({3, 5, 8}, DType::bf16);
  expect_layout(tall.view(), 12, 5, 5);
  expect_layout(wide.view(), 15, 8, 8);
  expect_layout(wide.view().slice(2, 1, 6), 15, 5, 8);  // rows of a wider buffer
  expect_layout(wide.view().slice(0, 1, 2), 5, 8, 8);   // a leading extent of 1 is skipped
  Tensor scalar = Tensor::zeros({}, DType::f32);
  expect_layout(scalar.view(), 1, 1, 1);
  EXPECT_FALSE(row_layout(tall.view().transpose(0, 1)).has_value()) << "the last axis is not contiguous";
  EXPECT_FALSE(row_layout(wide.view().slice(1, 0, 4).transpose(0, 1)).has_value()) << "leading axes not evenly spaced";
}

// The register width of the CUDA row kernels (rms_norm, softmax) at each boundary: the smallest
// that holds the row, 0 (the loop kernels) past 32 a thread.
TEST(CudaRuntime, RowCacheWidthHoldsTheRow) {
  constexpr int kThreads = 256;
  const std::pair<int64_t, int> expected[] = {{0, 1},    {1, 1},     {256, 1},   {257, 2},   {1024, 4},
                                              {1025, 8}, {4096, 16}, {4099, 32}, {8192, 32}, {8193, 0}};
  for (const auto& [dim, width] : expected) EXPECT_EQ(row_cache_per_thread(dim, kThreads), width) << "dim " << dim;
  EXPECT_EQ(row_cache_per_thread(64, 32), 2);
}

#if LATHE_HAVE_CUDA
// cuBLASLt is loaded on first use, not linked (device/cublaslt.h): every entry point the CUDA
// matmul calls resolves from the toolkit this build was configured with, GPU or not.
TEST(CudaRuntime, CublasLtLoadsWithEveryEntryPoint) {
  const CublasLt& lt = cublaslt();
#define LATHE_EXPECT_ENTRY(name) EXPECT_NE(reinterpret_cast<const void*>(lt.name), nullptr) << #name;
  LATHE_CUBLASLT_ENTRY_POINTS(LATHE_EXPECT_ENTRY)
#undef LATHE_EXPECT_ENTRY
  EXPECT_NE(std::string(cublaslt_path()).find("libcublasLt.so"), std::string::npos) << cublaslt_path();
  // A status name comes from the library itself.
  EXPECT_STREQ(lt.cublasLtGetStatusName(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
}
#endif

TEST(CudaRuntime, CopiesRoundTripValuesAndStridedLayouts) {
  if (!available()) GTEST_SKIP() << "no usable CUDA device: " << status_line();
  Tensor wide = Tensor::empty({3, 5, 8}, DType::f32);
  fill_uniform(wide, 7, -1, 1);
  const TensorView rows = wide.view().slice(2, 1, 6);  // (3, 5, 5) rows of a wider buffer
  Tensor device = to_device(rows);
  EXPECT_EQ(device.view().device, Device::cuda);
  Tensor back = to_host(device);
  EXPECT_EQ(to_vector<float>(back), to_vector<float>(rows));
  // Device to a strided host view.
  Tensor target = Tensor::zeros({3, 5, 8}, DType::f32);
  copy(target.view().slice(2, 1, 6), device);
  EXPECT_EQ(to_vector<float>(target.view().slice(2, 1, 6)), to_vector<float>(rows));
  EXPECT_EQ(read_element(target, 0), 0.0) << "elements outside the view stay untouched";
  Tensor pinned = pinned_empty({3, 5, 5}, DType::f32);
  copy(pinned, device);
  EXPECT_EQ(to_vector<float>(pinned), to_vector<float>(rows));
  EXPECT_GT(memory_stats().allocations, 0);
}

}  // namespace
}  // namespace lathe::cuda
