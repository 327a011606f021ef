// Ops given device tensors: one device per call, and without a usable GPU one clear error naming
// why. (The device paths themselves are checked by the op contract tests wherever a GPU is usable.)
#include <gtest/gtest.h>

#include "expect_error.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/ops/matmul/matmul.h"

namespace lathe {
namespace {

// A view that claims to be on the GPU (its memory is host memory; nothing may read it).
TensorView claimed_device_view(const Tensor& tensor) {
  TensorView view = tensor.view();
  view.device = Device::cuda;
  return view;
}

TEST(DeviceDispatch, HostElementAccessRefusesDeviceTensors) {
  Tensor tensor = Tensor::zeros({3}, DType::f32);
  const TensorView view = claimed_device_view(tensor);
  expect_error([&] { read_element(view, 0); }, "copy it to the host first");
  expect_error([&] { to_vector<float>(view); }, "copy it to the host first");
  EXPECT_EQ(view.describe(), "cuda:f32(3)");
}

TEST(DeviceDispatch, AnOpRefusesTensorsOnTwoDevices) {
  Tensor a = Tensor::zeros({2, 3}, DType::f32), b = Tensor::zeros({3, 4}, DType::f32),
         c = Tensor::zeros({2, 4}, DType::f32);
  MatmulArgs args;
  args.a = a;
  args.b = b;
  args.c = claimed_device_view(c);
  expect_error([&] { matmul(args); }, "matmul: tensors on both the host and the GPU");
}

TEST(DeviceDispatch, AnOpOnDeviceTensorsWithoutADeviceSaysWhy) {
  if (cuda::available()) GTEST_SKIP() << "a CUDA device is usable here";
  Tensor a = Tensor::zeros({2, 3}, DType::f32), b = Tensor::zeros({3, 4}, DType::f32),
         c = Tensor::zeros({2, 4}, DType::f32);
  MatmulArgs args;
  args.a = claimed_device_view(a);
  args.b = claimed_device_view(b);
  args.c = claimed_device_view(c);
  expect_error([&] { matmul(args); },
               cuda::compiled() ? "matmul: no usable CUDA device" : "matmul: no CUDA implementation");
}

}  // namespace
}  // namespace lathe
