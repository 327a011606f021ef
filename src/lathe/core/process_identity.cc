#include "lathe/core/process_identity.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace lathe {

std::string process_identity(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
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
