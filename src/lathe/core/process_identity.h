// Naming a process so that a later check cannot mistake another process that reused its pid for
// it: "<pid> <start time>" (the start time in clock ticks since boot, /proc/<pid>/stat field 22).
// Linux only (/proc).
#pragma once

#include <sys/types.h>

#include <string>

namespace lathe {

// The identity of a running process; "" when there is no such process or it is a zombie.
std::string process_identity(pid_t pid);

// Whether the process named by `identity` (from process_identity) is still running.
bool process_identity_alive(const std::string& identity);

}  // namespace lathe
