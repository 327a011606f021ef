// The CUDA devices this process can use, as the rest of lathe sees them: no CUDA header is needed
// to include this one, and every function works in a build without CUDA (it then reports "not
// compiled" and `available()` is false), so callers need no #if.
//
// A device is usable when the build has the CUDA backend (cmake -DLATHE_CUDA=auto|on finding the
// toolkit), a driver answers, and the GPU's compute capability is one the build compiled for
// (sm_90: Hopper). `lathe info` prints status_line(); `train.device=cuda` is refused by the config
// check, before any work, with status_line() in its message (the trainer's GPU path is not built
// yet; it will call require_available()).
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

// Waits for all work queued on the current device (errors of earlier asynchronous work surface
// here, named by `what`).
void synchronize(const char* what);

}  // namespace lathe::cuda
