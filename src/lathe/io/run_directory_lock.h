// One writer per run directory: an exclusive flock(2) on <run_dir>/lock, held while the object
// lives. The kernel drops the lock when its process ends however it ends (SIGKILL included), so a
// crashed run never leaves it stuck; the file itself may stay. The file holds "<pid> <holder>" of
// the process that holds the lock, for the refusal message.
//
// `lathe launch` holds the lock for the whole job and lets its worker group inherit it (the file
// descriptor stays open across exec): its trainers find the lock taken by the pid in
// LATHE_RUN_DIR_LOCK_HOLDER, which the supervisor sets, and go on without taking it themselves.
#pragma once

#include <string>

namespace lathe {

class RunDirectoryLock {
 public:
  RunDirectoryLock() = default;
  // Takes the lock of an existing directory `run_dir`. Throws lathe::Error, one line naming the run
  // directory and the holder's pid, when another process holds it (unless that process is the pid
  // in LATHE_RUN_DIR_LOCK_HOLDER); or naming the file when it cannot be opened. `holder` says what
  // the process is ("lathe train"). inherited_by_children: the descriptor stays open across exec.
  static RunDirectoryLock acquire(const std::string& run_dir, const std::string& holder,
                                  bool inherited_by_children = false);
  ~RunDirectoryLock();
  RunDirectoryLock(RunDirectoryLock&& other) noexcept;
  RunDirectoryLock& operator=(RunDirectoryLock&& other) noexcept;
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

  bool held() const { return fd_ >= 0; }  // false when the supervisor holds it for this process

 private:
  int fd_ = -1;
};

}  // namespace lathe
