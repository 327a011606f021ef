// The device memory of the host simulation of tests (cuda_runtime.h, HostSimulation): host pages
// that host code cannot touch, as on a real GPU.
//
// Every simulated device tensor is its own mapping of whole pages, filled with NaN (as fresh
// device memory holds no zeros to rely on) and then protected (PROT_NONE). Only the paths that a
// real GPU serves open them, for as long as they run: an op called on device tensors (ops/op.h
// runs its CPU implementation inside a SimulatedDeviceAccess over its arguments), copies and
// fills (device_tensor.h). Anything else that dereferences device memory on the host (a loop over
// ptr<float>() of a weight, a gradient or a batch the trainer moved to the GPU) faults at once in
// the simulation, as it would on the GPU, instead of passing silently on host memory; the fault
// prints one line naming the simulation before the process dies.
//
// Access is counted per mapping, so threads that open the same tensor (an op on the trainer thread,
// a copy on the gradient reducer's) keep it open until the last one closes it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "lathe/core/tensor.h"

namespace lathe::cuda {

// A contiguous tensor tagged Device::cuda in protected, NaN-filled host pages.
Tensor simulated_device_empty(const Shape& shape, DType dtype);

// Opens the mappings of the simulated device views given to open() to host reads and writes until
// it is destroyed. Views in host memory (or empty) are ignored.
class SimulatedDeviceAccess {
 public:
  SimulatedDeviceAccess() = default;
  ~SimulatedDeviceAccess();
  SimulatedDeviceAccess(const SimulatedDeviceAccess&) = delete;
  SimulatedDeviceAccess& operator=(const SimulatedDeviceAccess&) = delete;
  void open(const TensorView& view);

 private:
  std::vector<std::pair<uintptr_t, uint64_t>> opened_;  // (mapping, serial) per open() that found one
};

// Installs (once) the SIGSEGV handler that names the simulation in the fault's message.
void install_simulated_fault_message();

}  // namespace lathe::cuda
