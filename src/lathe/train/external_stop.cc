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

ExternalStopWatcher::ExternalStopWatcher(double orphan_exit_seconds) : orphan_exit_seconds_(orphan_exit_seconds) {
  if (const char* directory = std::getenv("LATHE_HEARTBEAT_DIR"); directory && *directory)
    stop_file_ = stop_file_path(directory);
  if (const char* supervisor = std::getenv("LATHE_SUPERVISOR"); supervisor && *supervisor) supervisor_ = supervisor;
  if (!stop_file_.empty() || !supervisor_.empty()) thread_ = std::thread([this] { watch(); });
}

ExternalStopWatcher::~ExternalStopWatcher() {
  done_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ExternalStopWatcher::watch() {
  using Clock = std::chrono::steady_clock;
  bool orphaned = false;
  Clock::time_point orphaned_at;
  while (!done_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!stop_file_.empty() && training_stop_signal().load() == 0) {
      std::ifstream file(stop_file_);
      int signal_number = 0;
      if (file.is_open()) training_stop_signal().store(file >> signal_number && signal_number > 0 ? signal_number : SIGTERM);
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
