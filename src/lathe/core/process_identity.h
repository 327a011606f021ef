// Naming a process so that a later check cannot mistake another process that reused its pid for
// it: "<pid> <start time>" (the start time in clock ticks since boot, /proc/<pid>/stat field 22).
// Linux only (/proc).
#pragma once

#include <sys/types.h>

#include <string>

namespace lathe {

// The text of /proc/<pid>/stat; "" when the process is gone, whenever it goes (an exit between
// the open and the read makes the read fail with ESRCH, which std::ifstream turns into a thrown
// std::ios_base::failure: plain read(2) here).
std::string process_stat_text(pid_t pid);
// The rest of an open /proc file, from its descriptor (not closed); "" when a read fails.
std::string read_proc_file(int fd);

// The identity of a running process; "" when there is no such process or it is a zombie.
std::string process_identity(pid_t pid);

// Whether the process named by `identity` (from process_identity) is still running.
bool process_identity_alive(const std::string& identity);

}  // namespace lathe
