// The CUDA device layer as every machine sees it. Without a usable GPU (no CUDA in the build, or
// none on the machine): the status says why, and every device entry is one clear error. With one:
// copies between host and device keep values and layouts, and device tensors are refused by host
// element access. The ops' device paths are checked by the op contract tests (the "cuda"
// implementation of each op is tested wherever a GPU is usable).
#include "lathe/device/cuda_runtime.h"

#include <gtest/gtest.h>

#include "expect_error.h"
#include "lathe/core/rng.h"
#include "lathe/device/device_tensor.h"
#include "lathe/ops/matmul/matmul.h"

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

// A view that claims to be on the GPU (its memory is host memory; nothing may read it).
TensorView claimed_device_view(const Tensor& tensor) {
  TensorView view = tensor.view();
  view.device = Device::cuda;
  return view;
}

TEST(CudaRuntime, HostElementAccessRefusesDeviceTensors) {
  Tensor tensor = Tensor::zeros({3}, DType::f32);
  const TensorView view = claimed_device_view(tensor);
  expect_error([&] { read_element(view, 0); }, "copy it to the host first");
  expect_error([&] { to_vector<float>(view); }, "copy it to the host first");
  EXPECT_EQ(view.describe(), "cuda:f32(3)");
}

TEST(CudaRuntime, AnOpRefusesTensorsOnTwoDevices) {
  Tensor a = Tensor::zeros({2, 3}, DType::f32), b = Tensor::zeros({3, 4}, DType::f32),
         c = Tensor::zeros({2, 4}, DType::f32);
  MatmulArgs args;
  args.a = a;
  args.b = b;
  args.c = claimed_device_view(c);
  expect_error([&] { matmul(args); }, "matmul: tensors on both the host and the GPU");
}

TEST(CudaRuntime, AnOpOnDeviceTensorsWithoutADeviceSaysWhy) {
  if (available()) GTEST_SKIP() << "a CUDA device is usable here";
  Tensor a = Tensor::zeros({2, 3}, DType::f32), b = Tensor::zeros({3, 4}, DType::f32),
         c = Tensor::zeros({2, 4}, DType::f32);
  MatmulArgs args;
  args.a = claimed_device_view(a);
  args.b = claimed_device_view(b);
  args.c = claimed_device_view(c);
  expect_error([&] { matmul(args); }, compiled() ? "matmul: no usable CUDA device" : "matmul: no CUDA implementation");
}

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
