#include "lathe/bench/lab/lab_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "lathe/bench/timing.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/error.h"

namespace lathe {

const char* lab_compiler();
const char* lab_base_flags();
const char* lab_isa_flags(int level);
const char* lab_header_text();

namespace {

std::string read_text(const std::string& path, size_t limit) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  std::string all = text.str();
  return all.size() > limit ? all.substr(0, limit) + "\n[... truncated]" : all;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

std::string lab_self_executable() {
  char path[4096];
  ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
  LATHE_CHECK(length > 0, "lathe lab: cannot find its own executable (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(length));
}

std::string lab_compile_signature() {
  Isa isa = active_isa();
  int level = isa >= Isa::avx512 ? 2 : isa >= Isa::avx2 ? 1 : 0;
  return str_cat(lab_compiler(), " ", lab_base_flags(), " ", lab_isa_flags(level));
}

LabCompileResult compile_candidate(const std::string& source, const std::string& dir) {
  LabCompileResult result;
  std::ofstream(dir + "/lathe_lab.h") << lab_header_text();
  result.command = str_cat(lab_compile_signature(), " -I", shell_quote(dir), " -o ", shell_quote(dir + "/candidate.so"),
                           " ", shell_quote(source));
  std::string log_path = dir + "/compile.log";
  int status = std::system((result.command + " > " + shell_quote(log_path) + " 2>&1").c_str());
  result.log = read_text(log_path, 4000);
  result.ok = status == 0 && access((dir + "/candidate.so").c_str(), R_OK) == 0;
  return result;
}

LabProcess::LabProcess(const std::vector<std::string>& argv, const LabLimits& limits, const std::string& stderr_path)
    : stderr_path_(stderr_path) {
  int in_pipe[2], out_pipe[2];
  LATHE_CHECK(pipe(in_pipe) == 0 && pipe(out_pipe) == 0, "lathe lab: cannot create pipes: ", std::strerror(errno));
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<char*> arguments;
  for (const auto& argument : argv) arguments.push_back(const_cast<char*>(argument.c_str()));
  arguments.push_back(nullptr);
  pid_ = fork();
  LATHE_CHECK(pid_ >= 0, "lathe lab: cannot fork: ", std::strerror(errno));
  if (pid_ == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    int error_fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (error_fd >= 0) dup2(error_fd, 2);
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    rlimit cpu{static_cast<rlim_t>(limits.cpu_seconds), static_cast<rlim_t>(limits.cpu_seconds + 1)};
    rlimit memory{static_cast<rlim_t>(limits.address_space_bytes), static_cast<rlim_t>(limits.address_space_bytes)};
    rlimit core{0, 0};
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_AS, &memory);
    setrlimit(RLIMIT_CORE, &core);
    setpgid(0, 0);  // its own group: the kill reaches any process the candidate starts
    execv(arguments[0], arguments.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  to_child_ = in_pipe[1];
  from_child_ = out_pipe[0];
  signal(SIGPIPE, SIG_IGN);  // a worker that died must not take lathe with it on the next write
}

LabProcess::~LabProcess() {
  if (!reaped_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
}

bool LabProcess::send_line(const std::string& line) {
  std::string text = line + "\n";
  return write(to_child_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

std::optional<std::string> LabProcess::read_line(double timeout_seconds) {
  double deadline = now_seconds() + timeout_seconds;
  while (true) {
    size_t newline = buffered_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    double left = deadline - now_seconds();
    if (left <= 0) {
      timed_out_ = true;
      return std::nullopt;
    }
    pollfd descriptor{from_child_, POLLIN, 0};
    int ready = poll(&descriptor, 1, static_cast<int>(left * 1000) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char chunk[4096];
    ssize_t got = read(from_child_, chunk, sizeof chunk);
    if (got <= 0) return std::nullopt;  // the worker exited
    buffered_.append(chunk, static_cast<size_t>(got));
  }
}

LabExit LabProcess::wait(double timeout_seconds) {
  LabExit exit;
  int status = 0;
  double deadline = now_seconds() + timeout_seconds;
  while (!reaped_) {
    pid_t done = timed_out_ ? 0 : waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      break;
    }
    if (timed_out_ || now_seconds() > deadline) {
      exit.timed_out = true;
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      reaped_ = true;
      break;
    }
    usleep(2000);
  }
  if (!exit.timed_out) {
    if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
    if (WIFEXITED(status)) exit.code = WEXITSTATUS(status);
  }
  exit.stderr_text = read_text(stderr_path_, 2000);
  return exit;
}

}  // namespace lathe
