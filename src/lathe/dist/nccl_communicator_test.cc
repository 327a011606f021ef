// NcclCommunicator on a real GPU (skipped elsewhere, with the reason): one rank, bootstrapped over
// the single-process communicator. A world of one sums and gathers each value with itself, so the
// values must come back unchanged; what this checks is that NCCL loads, joins, and takes lathe's
// device tensors and stream (a host pointer or a wrong stream fails here, not in a multi-GPU job).
// Device tensors on any other communicator are staged through the host: checked under the host
// simulation on every machine.
#include "lathe/dist/nccl_communicator.h"

#include <gtest/gtest.h>

#include "lathe/device/cuda_runtime.h"
#include "lathe/device/device_tensor.h"

namespace lathe {
namespace {

Tensor counting(int64_t n) {
  Tensor values = Tensor::empty({n}, DType::f32);
  for (int64_t i = 0; i < n; ++i) values.ptr<float>()[i] = 0.5f * static_cast<float>(i) - 3.0f;
  return values;
}

void expect_unchanged(const Tensor& device, const Tensor& expected) {
  const Tensor back = cuda::to_host(device);
  EXPECT_EQ(to_vector<float>(back), to_vector<float>(expected));
}

TEST(NcclCommunicator, OneRankTakesDeviceTensors) {
  const std::string why_not = nccl_unavailable_reason();
  if (!why_not.empty()) GTEST_SKIP() << "NCCL not usable here: " << why_not;
  SingleProcessCommunicator bootstrap;
  std::unique_ptr<Communicator> nccl = make_nccl_communicator(bootstrap);
  ASSERT_NE(nccl, nullptr);
  EXPECT_EQ(nccl->world_size(), 1);
  EXPECT_NE(nccl->name().find("NCCL"), std::string::npos) << nccl->name();
  EXPECT_NE(nccl->device_transport().find("NCCL"), std::string::npos);
  EXPECT_EQ(nccl_status_line().rfind("NCCL ", 0), 0u) << nccl_status_line();
  const Tensor expected = counting(1000);
  Tensor device = cuda::to_device(expected);
  nccl->all_reduce_sum(device.view());
  expect_unchanged(device, expected);
  nccl->all_gather(device.view(), {1000});
  expect_unchanged(device, expected);
  // Host tensors and scalars go to the bootstrap communicator.
  const Tensor host = counting(10);
  nccl->all_reduce_sum(host.view());
  const Tensor same = counting(10);
  EXPECT_EQ(to_vector<float>(host), to_vector<float>(same));
  double scalar = 2.5;
  nccl->all_reduce_sum(&scalar, 1);
  EXPECT_EQ(scalar, 2.5);
}

TEST(NcclCommunicator, StatusLineSaysWhyNotWithoutAGpu) {
  if (nccl_unavailable_reason().empty()) GTEST_SKIP() << "NCCL is usable here: " << nccl_status_line();
  EXPECT_EQ(nccl_status_line().rfind("not usable", 0), 0u) << nccl_status_line();
}

TEST(NcclCommunicator, StagedCollectivesTakeSimulatedDeviceTensors) {
  cuda::HostSimulation simulation;
  EXPECT_NE(nccl_unavailable_reason(), "");  // the simulation has no GPU memory for NCCL
  SingleProcessCommunicator communicator;
  EXPECT_EQ(communicator.device_transport(), "staged through host memory");
  const Tensor expected = counting(100);
  const Tensor device = cuda::to_device(expected);
  communicator.all_reduce_sum(device.view());
  expect_unchanged(device, expected);
  try {
    const Tensor zeros = Tensor::zeros({4}, DType::bf16);
    const Tensor bf16 = cuda::to_device(zeros);
    communicator.all_reduce_sum(bf16.view());
    FAIL() << "a bf16 tensor was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("must be a contiguous f32 tensor"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace lathe
