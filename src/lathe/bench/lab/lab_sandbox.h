// The kernel lab's sandbox: compiling a candidate and running the worker (lab_task.h) as a child
// process of lathe (fork + exec of `lathe lab --worker`) under limits: CPU time and address space
// by setrlimit, no core files, a wall-clock deadline enforced by the parent (SIGKILL). Whatever the
// candidate does (crash, hang, exhaust memory) ends in a LabExit, never in lathe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace lathe {

struct LabLimits {
  double wall_seconds = 30;
  int cpu_seconds = 120;
  long long address_space_bytes = 8ll << 30;
};

struct LabCompileResult {
  bool ok = false;
  std::string command;
  std::string log;  // the compiler's messages (first 4000 characters)
};

// Writes lathe_lab.h into `dir` and compiles `source` into dir/candidate.so with lab_compiler()
// and lathe's flags for the active ISA.
LabCompileResult compile_candidate(const std::string& source, const std::string& dir);
// The compiler and flags compile_candidate uses now (a cache of compiled objects keys on it).
std::string lab_compile_signature();

struct LabExit {
  bool timed_out = false;
  int signal = 0;           // the signal that ended it (0: exited)
  int code = 0;             // exit code when it exited
  std::string stderr_text;  // what the worker printed on stderr (first 2000 characters)
  bool clean() const { return !timed_out && signal == 0 && code == 0; }
};

// One worker process with its stdin and stdout as pipes.
class LabProcess {
 public:
  LabProcess(const std::vector<std::string>& argv, const LabLimits& limits, const std::string& stderr_path);
  ~LabProcess();
  LabProcess(const LabProcess&) = delete;
  LabProcess& operator=(const LabProcess&) = delete;

  bool send_line(const std::string& line);
  // The next line of the worker's stdout; nullopt when it exits or the deadline passes first.
  std::optional<std::string> read_line(double timeout_seconds);
  // Waits for the exit (killing it once `timeout_seconds` pass).
  LabExit wait(double timeout_seconds);

 private:
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buffered_, stderr_path_;
  bool reaped_ = false, timed_out_ = false;
};

// The path of this executable (the worker is `lathe lab --worker`).
std::string lab_self_executable();

}  // namespace lathe
