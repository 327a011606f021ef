// The kernel lab's worker process (lab_task.h): everything here runs beside the candidate, in the
// process that may crash, hang or scribble; the parent judges what comes back.
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "lathe/bench/lab/lab_task.h"
#include "lathe/bench/timing.h"

namespace lathe {

namespace {

constexpr int64_t kPage = 4096;
constexpr unsigned char kCanary = 0xA5;

// One output in its own mapping: [guard page][slack + data, data's end 64-byte padded][guard page].
// The data starts 64-byte aligned; the padding after it and the slack before it hold a canary.
struct GuardedOutput {
  char* mapping = nullptr;
  int64_t mapping_bytes = 0;
  char* data = nullptr;
  int64_t bytes = 0, padded = 0;
  char* front_guard() const { return mapping; }
  char* back_guard() const { return mapping + mapping_bytes - kPage; }
  char* body() const { return mapping + kPage; }
};

// Read by the signal handler: plain arrays, no allocation.
constexpr int kMaxOutputs = 64;
struct GuardTable {
  int count = 0;
  const char* names[kMaxOutputs];
  char* front[kMaxOutputs];
  char* back[kMaxOutputs];
  const char* input_begin = nullptr;
  const char* input_end = nullptr;
} guard_table;

void write_text(const char* text) { (void)!write(2, text, std::strlen(text)); }

void on_fault(int signal, siginfo_t* info, void*) {
  const char* address = static_cast<const char*>(info->si_addr);
  for (int i = 0; i < guard_table.count; ++i) {
    bool back = address >= guard_table.back[i] && address < guard_table.back[i] + kPage;
    bool front = address >= guard_table.front[i] && address < guard_table.front[i] + kPage;
    if (back || front) {
      write_text("out-of-bounds access: output '");
      write_text(guard_table.names[i]);
      write_text(back ? "' touched past its end (guard page)\n" : "' touched before its start (guard page)\n");
      _exit(kLabWorkerOutOfBounds);
    }
  }
  if (address >= guard_table.input_begin && address < guard_table.input_end) {
    write_text("wrote to a read-only input\n");
    _exit(kLabWorkerWroteInput);
  }
  // Anything else: the plain crash, seen by the parent as the signal.
  ::signal(signal, SIG_DFL);
  raise(signal);
}

void install_fault_handler() {
  static char alternate_stack[1 << 16];  // a stack overflow still reaches the handler
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof alternate_stack;
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &action, nullptr);
  sigaction(SIGBUS, &action, nullptr);
}

GuardedOutput allocate_guarded(int64_t bytes) {
  GuardedOutput output;
  output.bytes = bytes;
  output.padded = (std::max<int64_t>(bytes, 1) + 63) / 64 * 64;
  int64_t body_pages = (output.padded + kPage - 1) / kPage;
  output.mapping_bytes = (body_pages + 2) * kPage;
  void* mapping = mmap(nullptr, output.mapping_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw_error("lab worker: cannot map ", output.mapping_bytes, " bytes for an output");
  output.mapping = static_cast<char*>(mapping);
  mprotect(output.front_guard(), kPage, PROT_NONE);
  mprotect(output.back_guard(), kPage, PROT_NONE);
  output.data = output.back_guard() - output.padded;
  return output;
}

// NaN (or all-ones for integers) in the data, the canary around it.
void poison_guarded(const GuardedOutput& output, DType dtype) {
  std::memset(output.body(), kCanary, output.back_guard() - output.body());
  if (dtype == DType::f32) {
    float nan = std::nanf("");
    float* values = reinterpret_cast<float*>(output.data);
    for (int64_t i = 0; i < output.bytes / 4; ++i) values[i] = nan;
  } else if (dtype == DType::bf16) {
    uint16_t* values = reinterpret_cast<uint16_t*>(output.data);
    for (int64_t i = 0; i < output.bytes / 2; ++i) values[i] = 0x7fc0;
  } else {
    std::memset(output.data, 0xff, output.bytes);
  }
}

bool canary_intact(const GuardedOutput& output) {
  for (const char* p = output.body(); p < output.data; ++p)
    if (static_cast<unsigned char>(*p) != kCanary) return false;
  for (const char* p = output.data + output.bytes; p < output.back_guard(); ++p)
    if (static_cast<unsigned char>(*p) != kCanary) return false;
  return true;
}

// Hardware counters of the timed runs (this process and the threads it starts).
class PerfCounters {
 public:
  PerfCounters() {
    const uint64_t configs[3] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_HW_CACHE_MISSES};
    for (int i = 0; i < 3; ++i) {
      perf_event_attr attr{};
      attr.size = sizeof attr;
      attr.type = PERF_TYPE_HARDWARE;
      attr.config = configs[i];
      attr.disabled = 1;
      attr.inherit = 1;
      attr.exclude_kernel = 1;
      attr.exclude_hv = 1;
      fds_[i] = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
      if (fds_[i] < 0) {
        std::string paranoid;
        std::ifstream("/proc/sys/kernel/perf_event_paranoid") >> paranoid;
        error_ = str_cat("perf_event_open: ", std::strerror(errno),
                         paranoid.empty() ? "" : str_cat(" (perf_event_paranoid ", paranoid, ")"));
        return;
      }
    }
  }
  ~PerfCounters() {
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }
  bool available() const { return error_.empty(); }
  void enable() {
    if (available())
      for (int fd : fds_) ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  }
  void disable() {
    if (available())
      for (int fd : fds_) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
  }
  std::string report(int runs) const {
    if (!available()) return "perf unavailable " + error_;
    uint64_t values[3] = {};
    for (int i = 0; i < 3; ++i)
      if (read(fds_[i], &values[i], sizeof values[i]) != sizeof values[i]) return "perf unavailable read failed";
    return str_cat("perf ", values[0], " ", values[1], " ", values[2], " ", runs);
  }

 private:
  int fds_[3] = {-1, -1, -1};
  std::string error_;
};

}  // namespace

int run_lab_worker(const std::string& dir, const std::string& mode) {
  LabTask task;
  char* data = nullptr;
  try {
    std::ifstream file(dir + "/task.json");
    std::stringstream text;
    text << file.rdbuf();
    task = LabTask::from_json(Json::parse(text.str()));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "lab worker: unreadable task: %s\n", error.what());
    return kLabWorkerSetupFailed;
  }
  int fd = open((dir + "/data.bin").c_str(), O_RDWR);
  if (fd >= 0) {
    void* mapping = mmap(nullptr, task.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    data = mapping == MAP_FAILED ? nullptr : static_cast<char*>(mapping);
    close(fd);
  }
  if (data == nullptr || static_cast<int64_t>(task.outputs.size()) > kMaxOutputs) {
    std::fprintf(stderr, "lab worker: cannot map %s/data.bin\n", dir.c_str());
    return kLabWorkerSetupFailed;
  }
  if (task.input_region_bytes > 0) mprotect(data, task.input_region_bytes, PROT_READ);
  void* library = dlopen((dir + "/candidate.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  LabCandidateFn candidate = library ? reinterpret_cast<LabCandidateFn>(dlsym(library, "lathe_candidate")) : nullptr;
  if (candidate == nullptr) {
    std::fprintf(stderr, "cannot load the candidate: %s\n", dlerror());
    return kLabWorkerLoadFailed;
  }

  std::vector<LabTensor> inputs(task.inputs.size()), outputs(task.outputs.size());
  std::vector<GuardedOutput> guarded;
  auto describe = [](LabTensor& tensor, const LabTensorSlot& slot, void* pointer) {
    tensor.data = pointer;
    tensor.dtype = lab_dtype(slot.dtype);
    tensor.rank = slot.shape.rank();
    for (int axis = 0; axis < slot.shape.rank() && axis < LATHE_LAB_MAX_RANK; ++axis)
      tensor.shape[axis] = slot.shape[axis];
    tensor.name = slot.name.c_str();
  };
  for (size_t i = 0; i < task.inputs.size(); ++i) describe(inputs[i], task.inputs[i], data + task.inputs[i].offset);
  for (size_t i = 0; i < task.outputs.size(); ++i) {
    guarded.push_back(allocate_guarded(task.outputs[i].bytes));
    describe(outputs[i], task.outputs[i], guarded.back().data);
    guard_table.names[i] = task.outputs[i].name.c_str();
    guard_table.front[i] = guarded.back().front_guard();
    guard_table.back[i] = guarded.back().back_guard();
  }
  guard_table.count = static_cast<int>(guarded.size());
  guard_table.input_begin = data;
  guard_table.input_end = data + task.input_region_bytes;
  std::vector<LabDim> dims;
  for (const auto& [name, value] : task.dims) dims.push_back({name.c_str(), value});
  install_fault_handler();

  // One run: poisoned outputs, the call, the canaries. Returns 0 or a worker exit code.
  auto run_once = [&](double* seconds, PerfCounters* counters) -> int {
    for (size_t i = 0; i < guarded.size(); ++i) poison_guarded(guarded[i], task.outputs[i].dtype);
    if (counters) counters->enable();
    double start = now_seconds();
    int status = candidate(inputs.data(), static_cast<int>(inputs.size()), outputs.data(),
                           static_cast<int>(outputs.size()), dims.data(), static_cast<int>(dims.size()), task.threads);
    if (seconds) *seconds = now_seconds() - start;
    if (counters) counters->disable();
    if (status != 0) {
      std::fprintf(stderr, "lathe_candidate returned %d\n", status);
      return kLabWorkerCandidateFailed;
    }
    for (size_t i = 0; i < guarded.size(); ++i)
      if (!canary_intact(guarded[i])) {
        std::fprintf(stderr, "out-of-bounds write: output '%s' wrote into the padding around it\n",
                     task.outputs[i].name.c_str());
        return kLabWorkerOutOfBounds;
      }
    return 0;
  };
  auto copy_back = [&] {
    for (size_t i = 0; i < guarded.size(); ++i)
      std::memcpy(data + task.outputs[i].offset, guarded[i].data, task.outputs[i].bytes);
  };

  if (mode == "check") {
    int status = run_once(nullptr, nullptr);
    if (status == 0) copy_back();
    return status;
  }
  PerfCounters counters;
  int timed_runs = 0;
  std::string command;
  while (std::getline(std::cin, command)) {
    if (command == "run") {
      double seconds = 0;
      int status = run_once(&seconds, &counters);
      if (status != 0) return status;
      ++timed_runs;
      std::printf("time %.9e\n", seconds);
      std::fflush(stdout);
    } else if (command == "finish") {
      copy_back();
      std::printf("%s\n", counters.report(timed_runs).c_str());
      std::fflush(stdout);
      return 0;
    }
  }
  return 0;
}

}  // namespace lathe
