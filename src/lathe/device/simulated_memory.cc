#include "lathe/device/simulated_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "lathe/core/error.h"

namespace lathe::cuda {
namespace {

struct Mapping {
  size_t bytes = 0;
  int users = 0;        // open SimulatedDeviceAccess scopes
  uint64_t serial = 0;  // tells a mapping from a later one at the same address
};
uint64_t next_serial = 1;  // guarded by registry_mutex

std::mutex registry_mutex;
std::map<uintptr_t, Mapping>& registry() {
  static auto* mappings = new std::map<uintptr_t, Mapping>;  // outlives static destructors
  return *mappings;
}

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

void protect(uintptr_t begin, size_t bytes, int protection) {
  LATHE_CHECK(mprotect(reinterpret_cast<void*>(begin), bytes, protection) == 0,
              "host simulation: mprotect failed: ", std::strerror(errno));
}

// The mapping that holds `address`, or registry().end(). Caller holds registry_mutex.
std::map<uintptr_t, Mapping>::iterator mapping_of(const void* address) {
  auto& mappings = registry();
  const auto key = reinterpret_cast<uintptr_t>(address);
  auto found = mappings.upper_bound(key);
  if (found == mappings.begin()) return mappings.end();
  --found;
  return key < found->first + found->second.bytes ? found : mappings.end();
}

void release(void* address) {
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    auto found = registry().find(reinterpret_cast<uintptr_t>(address));
    if (found == registry().end()) return;
    bytes = found->second.bytes;
    registry().erase(found);
  }
  munmap(address, bytes);
}

void on_segfault(int signal, siginfo_t* info, void*) {
  // Async-signal-safe: a fixed message, the address in hex, then the default action.
  static const char kMessage[] =
      "\nSIGSEGV under the host simulation of the GPU (device/simulated_memory.h): if the address "
      "below is a device tensor's, host code read or wrote GPU memory in place (a real GPU faults "
      "too); copy it to the host first. Address: 0x";
  (void)!write(2, kMessage, sizeof kMessage - 1);
  char digits[17];
  auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (int i = 15; i >= 0; --i, address >>= 4) digits[i] = "0123456789abcdef"[address & 15];
  digits[16] = '\n';
  (void)!write(2, digits, sizeof digits);
  ::signal(signal, SIG_DFL);
  raise(signal);
}

}  // namespace

Tensor simulated_device_empty(const Shape& shape, DType dtype) {
  const size_t wanted = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  const size_t bytes = std::max(page_size(), (wanted + page_size() - 1) / page_size() * page_size());
  void* address = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  LATHE_CHECK(address != MAP_FAILED, "host simulation: cannot map ", bytes, " bytes: ", std::strerror(errno));
  TensorView view;
  view.shape = shape;
  view.strides = contiguous_strides(shape);
  view.dtype = dtype;
  view.data = address;
  poison(view);  // as cudaMalloc's memory: never zeros to rely on
  view.device = Device::cuda;
  protect(reinterpret_cast<uintptr_t>(address), bytes, PROT_NONE);
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    registry()[reinterpret_cast<uintptr_t>(address)] = Mapping{bytes, 0, next_serial++};
  }
  return Tensor::adopt(std::shared_ptr<void>(address, release), view);
}

void SimulatedDeviceAccess::open(const TensorView& view) {
  if (view.device != Device::cuda || view.data == nullptr) return;
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto found = mapping_of(view.data);
  if (found == registry().end()) return;
  if (found->second.users++ == 0) protect(found->first, found->second.bytes, PROT_READ | PROT_WRITE);
  opened_.push_back({found->first, found->second.serial});
}

SimulatedDeviceAccess::~SimulatedDeviceAccess() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (const auto& [begin, serial] : opened_) {
    auto found = registry().find(begin);
    if (found == registry().end() || found->second.serial != serial) continue;  // freed while open
    if (--found->second.users == 0) protect(found->first, found->second.bytes, PROT_NONE);
  }
}

void install_simulated_fault_message() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = on_segfault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, nullptr);
  });
}

}  // namespace lathe::cuda
