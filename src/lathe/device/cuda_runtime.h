// The CUDA devices this process can use, as the rest of lathe sees them: no CUDA header is needed
// to include this one, and every function works in a build without CUDA (it then reports "not
// compiled" and `available()` is false), so callers need no #if.
//
// A device is usable when the build has the CUDA backend (cmake -DLATHE_CUDA=auto|on finding the
// toolkit), a driver answers, and the GPU's compute capability is one the build compiled for
// (sm_90: Hopper). `lathe info` prints status_line(); `train.device=cuda` without a usable device
// is refused by the config check, before any work, with unavailable_reason() in its message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe::cuda {

struct DeviceProperties {
  int index = 0;
  std::string name;          // "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability: 9.0 for Hopper
  int64_t total_memory = 0;  // bytes
  int multiprocessors = 0;
  double clock_ghz = 0;             // SM clock
  double memory_bandwidth_gbs = 0;  // from the memory clock and bus width (a datasheet figure, not measured)
};

// The device's f32 rate without tensor cores, from the datasheet arithmetic: SMs x clock x 128
// f32 lanes per SM (Volta through Hopper) x 2 (an FMA). H200: 132 x 1.98 GHz -> 66.9 TFLOP/s.
// The MFU denominator of f32 training on the GPU (matmuls run CUBLAS_COMPUTE_32F, no TF32).
double f32_peak_gflops(const DeviceProperties& device);
// The dense bf16 tensor-core rate likewise: SMs x clock x 4096 flops per SM per clock (Hopper's
// mma/wgmma rate; the H100/H200 datasheets' 989 TFLOP/s is 132 SMs at 1.83 GHz). At the clock the
// driver reports (1.98 GHz on the H200: 1070 TFLOP/s) it is above the datasheet figure, so an MFU
// against it is, if anything, understated.
double bf16_tensor_peak_gflops(const DeviceProperties& device);

// Whether this build has the CUDA backend, and the toolkit it was compiled with ("13.0").
bool compiled();
std::string toolkit_version();
// The lowest compute capability the build's kernels run on (90 for sm_90), 0 when not compiled.
int minimum_compute_capability();

// Devices the driver reports (empty when not compiled or no driver/GPU), queried once.
const std::vector<DeviceProperties>& devices();
// At least one device of a compute capability the build supports.
bool available();
// Why no device is usable ("no CUDA driver", "GPU 0 is sm_80; this build needs sm_90 or newer"),
// empty when one is.
std::string unavailable_reason();
// One line for `lathe info`: "compiled (CUDA 13.0), no device: no CUDA driver",
// "NVIDIA H200, sm_90, 139.8 GiB, 132 SMs (CUDA 13.0)", "not compiled (LATHE_CUDA=off or no toolkit)".
std::string status_line();
// Throws lathe::Error "<what>: no usable CUDA device: <reason>" unless available().
void require_available(const std::string& what);

// The GPU this process runs on: device 0 unless select_device() chose another (a data-parallel run
// gives each rank of a machine its own: its local rank modulo the device count). Call it before any
// CUDA work: lathe's stream and memory belong to the device current when they are first used.
// Every thread that queues work (the gradient reducer's too) runs on the selected device:
// use_selected_device() makes it the calling thread's current device (a thread-local check after
// the first call; stream_handle() and the allocator call it). Throws lathe::Error for an index
// outside devices().
void select_device(int index);
int selected_device();
void use_selected_device();

// Tests only: while a HostSimulation lives, "device" memory is host memory. Device tensors
// (device_tensor.h) are host pages tagged Device::cuda and protected from host access
// (simulated_memory.h), copies and fills are host copies, require_available() passes, and an op
// called on Device::cuda tensors runs its CPU implementation on the same memory, opened for the
// call (op.h). What it checks on any machine is the plumbing of GPU code paths (the trainer's):
// every tensor allocated on the device its op runs on (an op given host and device tensors
// refuses them), no host access to device tensors (read_element refuses them; a raw pointer read
// or write faults, as on a GPU), the same numbers as the host path. What it cannot check: the
// CUDA kernels themselves. Not thread-safe to construct while other threads run ops; nests.
// Composite CUDA implementations (ops/op.h) run as they are by default; with
// Composites::cpu_implementation they run the op's CPU implementation like every other op, for
// tests that compare a device run with a host run bit for bit (a composite is another summation
// order: grouped_matmul's loop of per-expert products; its own logic has its own tests).
class HostSimulation {
 public:
  enum class Composites { run_themselves, cpu_implementation };
  explicit HostSimulation(Composites composites = Composites::run_themselves);
  ~HostSimulation();
  HostSimulation(const HostSimulation&) = delete;
  HostSimulation& operator=(const HostSimulation&) = delete;

 private:
  Composites previous_;
};
bool host_simulation_active();
// Whether the active simulation runs composite implementations as they are.
bool host_simulation_runs_composites();

// Waits for all work queued on the current device (errors of earlier asynchronous work surface
// here, named by `what`).
void synchronize(const char* what);

}  // namespace lathe::cuda
