// The host simulation's device memory (device/simulated_memory.h) faults on host access, as a GPU's
// does, and opens only for the paths a GPU serves: ops (op.h opens their arguments), copies, fills.
#include <gtest/gtest.h>

#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"
#include "lathe/device/simulated_memory.h"
#include "lathe/ops/add/add.h"

namespace lathe {
namespace {

TEST(SimulatedDeviceMemoryDeathTest, AHostReadOfADeviceTensorFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  cuda::HostSimulation simulation;
  const Tensor device = cuda::device_zeros({16}, DType::f32);
  EXPECT_DEATH(
      {
        volatile float value = static_cast<const float*>(device.view().data)[3];
        (void)value;
      },
      "host simulation of the GPU");
  EXPECT_DEATH(static_cast<float*>(device.view().data)[0] = 1.0f, "host simulation of the GPU");
}

TEST(SimulatedDeviceMemory, OpsCopiesAndFillsReachIt) {
  cuda::HostSimulation simulation;
  Tensor host = Tensor::empty({1000}, DType::f32);
  for (int64_t i = 0; i < host.numel(); ++i) host.ptr<float>()[i] = static_cast<float>(i);
  const Tensor a = cuda::to_device(host), b = cuda::to_device(host);
  const Tensor sum = cuda::device_empty({1000}, DType::f32);
  add({a, b, sum});  // the op opens its arguments for the CPU implementation
  const Tensor back = cuda::to_host(sum);
  for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.ptr<float>()[i], 2.0f * static_cast<float>(i));
  cuda::fill_bytes(sum, 0);
  const Tensor zeros = cuda::to_host(sum);
  EXPECT_EQ(to_vector<float>(zeros), std::vector<float>(1000, 0.0f));
  // Closed again after each: the same read faults (checked above); a second open of the same
  // tensor by two scopes keeps it open until both close.
  {
    cuda::SimulatedDeviceAccess outer;
    outer.open(sum);
    {
      cuda::SimulatedDeviceAccess inner;
      inner.open(sum);
    }
    EXPECT_EQ(static_cast<const float*>(sum.view().data)[7], 0.0f);  // still open
  }
}

}  // namespace
}  // namespace lathe
