// Stop requests that do not arrive as a signal to this process (train/trainer.h). A thread polls,
// every 0.1 s:
//   - the stop file <LATHE_HEARTBEAT_DIR>/stop, which `lathe launch` writes to stop its worker
//     group (launch/elastic_supervisor.h): it holds the signal number the supervisor got (15 for a
//     planned resize). The file reaches every rank at once, whatever mpirun does with signals
//     and however busy its output forwarding is;
//   - the stop file <run_dir>/stop, for runs started without `lathe launch` (`mpirun -np N lathe
//     train`: Open MPI 4.1's mpirun gives its ranks no time to save on Ctrl-C, see README):
//     `touch RUN_DIR/stop` stops the run the same way; the lead removes the file when the run
//     stops, so the next run does not stop at once;
//   - the supervisor named by LATHE_SUPERVISOR ("<pid> <start time>", core/process_identity.h):
//     when it is gone (SIGKILL), the run stops as on SIGHUP, and a process still alive
//     orphan_exit_seconds later (stuck in a collective, say) exits with code 129, so no worker
//     trains on as an orphan.
// Either sets training_stop_signal(); the step loop reads it after every step and the ranks agree on
// the step by an all-reduce (train/checkpoint_hook.h). Without those variables nothing is watched.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace lathe {

class ExternalStopWatcher {
 public:
  // run_dir: whose stop file to watch ("" for none).
  explicit ExternalStopWatcher(const std::string& run_dir, double orphan_exit_seconds = 300);
  ~ExternalStopWatcher();  // stops and joins the thread
  ExternalStopWatcher(const ExternalStopWatcher&) = delete;
  ExternalStopWatcher& operator=(const ExternalStopWatcher&) = delete;

 private:
  void watch();

  std::string stop_file_, run_stop_file_, supervisor_;
  double orphan_exit_seconds_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;  // guarded by mutex_
  std::thread thread_;
};

// The stop file of a heartbeat directory.
std::string stop_file_path(const std::string& heartbeat_dir);

}  // namespace lathe
