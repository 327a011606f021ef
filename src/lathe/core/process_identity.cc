#include "lathe/core/process_identity.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace lathe {

std::string read_proc_file(int fd) {
  std::string text;
  char buffer[1024];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0) {
      text.append(buffer, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) text.clear();  // the process went (ESRCH): as if it had never been there
    return text;
  }
}

std::string process_stat_text(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text = read_proc_file(fd);
  ::close(fd);
  return text;
}

std::string process_identity(pid_t pid) {
  const std::string text = process_stat_text(pid);
  const size_t after_name = text.rfind(')');  // the command name may hold spaces and parentheses
  if (after_name == std::string::npos) return "";
  // Fields 3.. after the name: state, then 18 more numbers, then the start time (field 22).
  const char* cursor = text.c_str() + after_name + 1;
  char state = 0;
  int consumed = 0;
  if (std::sscanf(cursor, " %c%n", &state, &consumed) != 1 || state == 'Z' || state == 'X') return "";
  cursor += consumed;
  unsigned long long value = 0;
  for (int field = 4; field <= 22; ++field) {
    if (std::sscanf(cursor, " %llu%n", &value, &consumed) != 1) {
      long long signed_value = 0;  // a few fields may be negative (priority, nice)
      if (std::sscanf(cursor, " %lld%n", &signed_value, &consumed) != 1) return "";
    }
    cursor += consumed;
  }
  return std::to_string(pid) + " " + std::to_string(value);
}

bool process_identity_alive(const std::string& identity) {
  const long pid = std::atol(identity.c_str());
  return pid > 0 && process_identity(static_cast<pid_t>(pid)) == identity;
}

}  // namespace lathe
