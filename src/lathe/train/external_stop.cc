#include "lathe/train/external_stop.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "lathe/core/process_identity.h"
#include "lathe/train/trainer.h"

namespace lathe {

std::string stop_file_path(const std::string& heartbeat_dir) { return heartbeat_dir + "/stop"; }

ExternalStopWatcher::ExternalStopWatcher(const std::string& run_dir, double orphan_exit_seconds)
    : orphan_exit_seconds_(orphan_exit_seconds) {
  if (!run_dir.empty()) run_stop_file_ = stop_file_path(run_dir);
  if (const char* directory = std::getenv("LATHE_HEARTBEAT_DIR"); directory && *directory)
    stop_file_ = stop_file_path(directory);
  if (const char* supervisor = std::getenv("LATHE_SUPERVISOR"); supervisor && *supervisor) supervisor_ = supervisor;
  thread_ = std::thread([this] { watch(); });
}

ExternalStopWatcher::~ExternalStopWatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ExternalStopWatcher::watch() {
  using Clock = std::chrono::steady_clock;
  bool orphaned = false;
  Clock::time_point orphaned_at;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return done_; })) return;
    }
    for (const std::string* path : {&stop_file_, &run_stop_file_}) {
      if (path->empty() || training_stop_signal().load() != 0) continue;
      std::ifstream file(*path);
      int signal_number = 0;
      if (file.is_open())
        training_stop_signal().store(file >> signal_number && signal_number > 0 ? signal_number : SIGTERM);
    }
    if (supervisor_.empty()) continue;
    if (!orphaned && !process_identity_alive(supervisor_)) {
      orphaned = true;
      orphaned_at = Clock::now();
      std::fprintf(stderr, "lathe train: the supervisor (pid %ld) is gone: saving a checkpoint and stopping\n",
                   std::atol(supervisor_.c_str()));
      int expected = 0;
      training_stop_signal().compare_exchange_strong(expected, SIGHUP);
    }
    if (orphaned && std::chrono::duration<double>(Clock::now() - orphaned_at).count() > orphan_exit_seconds_) {
      std::fprintf(stderr, "lathe train: the supervisor is gone and this process did not stop within %.0f s: exiting\n",
                   orphan_exit_seconds_);
      std::fflush(stderr);
      ::_exit(128 + SIGHUP);
    }
  }
}

}  // namespace lathe
