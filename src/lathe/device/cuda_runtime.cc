#include "lathe/device/cuda_runtime.h"

#include <atomic>
#include <cstdio>

#include "lathe/core/error.h"
#include "lathe/device/simulated_memory.h"

#if LATHE_HAVE_CUDA
#include "lathe/device/cublaslt.h"
#include "lathe/device/cuda_check.h"
#endif

namespace lathe::cuda {

bool compiled() {
#if LATHE_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

#if LATHE_HAVE_CUDA

std::string toolkit_version() { return str_cat(CUDART_VERSION / 1000, ".", CUDART_VERSION % 1000 / 10); }

int minimum_compute_capability() { return LATHE_CUDA_MIN_CC; }

void throw_runtime_error(cudaError_t error, const char* op, const char* call) {
  throw_error(op, ": ", call, " failed: ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
}

void throw_cublas_error(cublasStatus_t status, const char* op, const char* call) {
  const CublasLt& lt = cublaslt();  // loaded: the status came from one of its calls
  throw_error(op, ": ", call, " failed: ", lt.cublasLtGetStatusName(status), " (", lt.cublasLtGetStatusString(status),
              ")");
}

namespace {

struct DeviceQuery {
  std::vector<DeviceProperties> devices;
  std::string no_device_reason;  // why `devices` is empty or unusable
};

int attribute(cudaDeviceAttr which, int device) {
  int value = 0;
  return cudaDeviceGetAttribute(&value, which, device) == cudaSuccess ? value : 0;
}

DeviceQuery query_devices() {
  DeviceQuery query;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    query.no_device_reason = str_cat("no CUDA device (", cudaGetErrorName(error), ": ", cudaGetErrorString(error), ")");
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return query;
  }
  if (count == 0) query.no_device_reason = "the driver reports no CUDA device";
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, index) != cudaSuccess) continue;
    DeviceProperties device;
    device.index = index;
    device.name = properties.name;
    device.major = properties.major;
    device.minor = properties.minor;
    device.total_memory = static_cast<int64_t>(properties.totalGlobalMem);
    device.multiprocessors = properties.multiProcessorCount;
    device.clock_ghz = attribute(cudaDevAttrClockRate, index) / 1e6;
    // Double data rate: two transfers per clock over the bus width.
    device.memory_bandwidth_gbs = 2.0 * attribute(cudaDevAttrMemoryClockRate, index) * 1e3 *
                                  attribute(cudaDevAttrGlobalMemoryBusWidth, index) / 8 / 1e9;
    query.devices.push_back(device);
  }
  if (!query.devices.empty()) {
    const DeviceProperties& first = query.devices.front();
    if (first.major * 10 + first.minor < LATHE_CUDA_MIN_CC)
      query.no_device_reason = str_cat("GPU 0 (", first.name, ") is sm_", first.major, first.minor,
                                       "; this build needs sm_", LATHE_CUDA_MIN_CC, " or newer (Hopper)");
  }
  return query;
}

const DeviceQuery& device_query() {
  static const DeviceQuery query = query_devices();
  return query;
}

}  // namespace

const std::vector<DeviceProperties>& devices() { return device_query().devices; }

std::string unavailable_reason() { return device_query().no_device_reason; }

void synchronize(const char* what) {
  if (!host_simulation_active()) LATHE_CUDA_CHECK(what, cudaDeviceSynchronize());
}

#else  // no CUDA backend in this build

std::string toolkit_version() { return ""; }
int minimum_compute_capability() { return 0; }

const std::vector<DeviceProperties>& devices() {
  static const std::vector<DeviceProperties> none;
  return none;
}

std::string unavailable_reason() {
  return "this build has no CUDA backend (LATHE_CUDA=off, or no CUDA toolkit when it was configured)";
}

void synchronize(const char*) {}

#endif

// Asked by dispatch for every CUDA implementation: the answer is fixed for the process, so it is
// computed once.
bool available() {
  static const bool usable = compiled() && !devices().empty() && unavailable_reason().empty();
  return usable;
}

std::string status_line() {
  if (!compiled()) return "not compiled (LATHE_CUDA=off, or no CUDA toolkit at configure time)";
  if (!available()) return str_cat("compiled (CUDA ", toolkit_version(), "), no device: ", unavailable_reason());
  std::string line;
  for (const DeviceProperties& device : devices()) {
    char text[256];
    std::snprintf(text, sizeof text, "%s%s, sm_%d%d, %.1f GiB, %d SMs at %.2f GHz", line.empty() ? "" : "; ",
                  device.name.c_str(), device.major, device.minor, device.total_memory / 1073741824.0,
                  device.multiprocessors, device.clock_ghz);
    line += text;
  }
  return str_cat(line, " (CUDA ", toolkit_version(), ")");
}

double f32_peak_gflops(const DeviceProperties& device) {
  constexpr double kLanesPerSm = 128;
  return device.multiprocessors * device.clock_ghz * kLanesPerSm * 2.0;
}

double bf16_tensor_peak_gflops(const DeviceProperties& device) {
  constexpr double kFlopsPerSmPerClock = 4096;
  return device.multiprocessors * device.clock_ghz * kFlopsPerSmPerClock;
}

namespace {
std::atomic<int> simulations{0};
std::atomic<HostSimulation::Composites> composite_mode{HostSimulation::Composites::run_themselves};
std::atomic<int> selected{0};
}  // namespace

void select_device(int index) {
  LATHE_CHECK(index >= 0 && (host_simulation_active() || index < static_cast<int>(devices().size())),
              "CUDA device ", index, " does not exist (", devices().size(), " devices)");
  selected.store(index);
  use_selected_device();
}

int selected_device() { return selected.load(); }

void use_selected_device() {
#if LATHE_HAVE_CUDA
  thread_local int current = 0;  // a thread starts on device 0
  const int wanted = selected.load(std::memory_order_relaxed);
  if (wanted == current || host_simulation_active()) return;
  LATHE_CUDA_CHECK("select device", cudaSetDevice(wanted));
  current = wanted;
#endif
}

HostSimulation::HostSimulation(Composites composites) : previous_(composite_mode.load()) {
  install_simulated_fault_message();
  composite_mode.store(composites);
  simulations.fetch_add(1);
}
HostSimulation::~HostSimulation() {
  simulations.fetch_sub(1);
  composite_mode.store(previous_);
}
bool host_simulation_active() { return simulations.load(std::memory_order_relaxed) > 0; }
bool host_simulation_runs_composites() {
  return composite_mode.load(std::memory_order_relaxed) == HostSimulation::Composites::run_themselves;
}

void require_available(const std::string& what) {
  if (host_simulation_active()) return;
  LATHE_CHECK(available(), what, ": no usable CUDA device: ", unavailable_reason());
}

}  // namespace lathe::cuda
