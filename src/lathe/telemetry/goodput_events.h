// The goodput event log: every process of a run (each trainer rank, the `lathe launch`
// supervisor) appends timed events to its own JSON Lines file under <run_dir>/events/, which
// `lathe goodput` (train/goodput_report.h) turns into goodput, badput by category, MTTI and MTTR.
//
// File: <run_dir>/events/<role>-<pid>.jsonl, role "rank0", "rank1", ... or "launcher". One JSON
// object per line, written and flushed line by line (train/metrics_log.h), so a killed process
// keeps every event it finished; a torn last line is ignored by the reader. Times are Unix seconds
// (system clock: the processes of one run share a machine, or NTP-synchronised ones), written as
// seconds since the file's "epoch" (a string of Unix seconds in its process event) because a JSON
// number here keeps 9 significant digits; read_goodput_events adds the epoch back.
//
// Events (all carry "kind"; intervals carry "start" and "end", points carry "time"):
//   process      point     first line of each file: epoch, role, pid, attempt, rank, world
//   initialization  interval  process start of the trainer until its training loop begins
//   startup      interval  start-up work: measuring machine peaks, autotuning
//   restore      interval  loading a checkpoint (step: the checkpoint's step)
//   step         interval  one optimizer step: step, first_sample (global sample position of the
//                          data loader before the step), data_seconds (time the step waited for
//                          its batches)
//   evaluation   interval  validation loss
//   checkpoint   interval  the time a checkpoint save blocked training (step)
//   job_end      point     the trainer returned normally (interrupted: true/false)
//   launch       point     supervisor: a worker group started (attempt, world, grad_accum)
//   failure      point     supervisor: a group failed (time: when it failed, detected: when the
//                          supervisor noticed, reason)
//   resize       point     supervisor: a planned stop to change the world size (from, to)
//   recovery     interval  supervisor: from a failure or resize until the next group started
//   job_start / job_finish  points  supervisor: the whole job (job_finish: ok true/false)
//
// The attempt names one start of a worker group: ranks of the same attempt ran together, so a
// step done again by a later attempt was lost. The supervisor passes it in LATHE_ATTEMPT; a
// trainer started by hand uses its MPI job id or its pid.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "lathe/core/json.h"

namespace lathe {

class MetricsLog;

double goodput_clock();  // Unix seconds, sub-second resolution

class GoodputEventLog {
 public:
  // Creates <run_dir>/events/<role>-<pid>.jsonl (appends when it exists) and writes the process
  // event. Throws lathe::Error naming the file when it cannot be written.
  GoodputEventLog(const std::string& run_dir, const std::string& role, const std::string& attempt, int rank, int world);
  ~GoodputEventLog();
  GoodputEventLog(const GoodputEventLog&) = delete;
  GoodputEventLog& operator=(const GoodputEventLog&) = delete;

  // extra: an object whose members are added to the event (or null).
  void record_interval(const std::string& kind, double start, double end, const Json& extra = Json());
  void record_point(const std::string& kind, double time, const Json& extra = Json());
  const std::string& path() const;
  // A time as this file stores it (for a time-valued extra member such as "detected").
  double relative(double time) const { return time - epoch_; }

 private:
  std::unique_ptr<MetricsLog> log_;
  double epoch_;
};

// The trainer's hooks: the event log of this rank plus the heartbeat file the supervisor watches.
// Rank and world come from the launcher's environment (core/launcher.h: Open MPI, PMI, Slurm,
// torchrun; 0 and 1 without), the attempt from LATHE_ATTEMPT, the heartbeat directory from LATHE_HEARTBEAT_DIR
// (none when unset). Every hook is cheap next to a training step (one flushed line). The event
// file is created by training_begins(): a run refused before training (bad config, another
// model's checkpoint) leaves the run directory untouched; earlier events wait in memory.
class TrainingEvents {
 public:
  explicit TrainingEvents(const std::string& run_dir);  // records when the process started
  ~TrainingEvents();

  double now() const { return goodput_clock(); }
  void restored(double start, int64_t step);
  void startup(double start);
  void training_begins();  // ends initialization
  // The trainer's data callback adds the seconds it spent producing batches of the current step.
  void add_data_seconds(double seconds) { data_seconds_ += seconds; }
  // first_sample: the data loader's global sample position before the step. Touches the heartbeat.
  void step_done(double start, int64_t step, int64_t first_sample);
  void evaluation(double start);
  void checkpoint(double start, int64_t step);
  void finished(bool interrupted);

 private:
  void touch_heartbeat(int64_t step);
  void record(const std::string& kind, double start, double end, const Json& extra = Json());

  struct Pending {
    std::string kind;
    double start, end;
    Json extra;
  };
  std::string run_dir_;
  int rank_;
  std::unique_ptr<GoodputEventLog> log_;  // from training_begins()
  std::vector<Pending> pending_;
  double process_start_;
  double data_seconds_ = 0;
  std::string heartbeat_path_;
};

// Heartbeat file of one rank inside the supervisor's heartbeat directory: "<step> <pid>\n", where
// step is the last finished step, -1 before training begins, kHeartbeatFinished once the trainer
// returned (the process then exits on purpose; the supervisor must not count that as a death).
inline constexpr int64_t kHeartbeatFinished = -3;
std::string heartbeat_file(const std::string& heartbeat_dir, int rank);

// Rank and world size of this process from Open MPI's environment (0 and 1 when not under mpirun).
int process_rank_from_environment();
int process_world_from_environment();

// Every event of every file under <run_dir>/events/, each with "file" (the file name) added, in
// file order. A torn last line is skipped; another malformed line throws lathe::Error naming the
// file and line. No events directory: an empty list.
std::vector<Json> read_goodput_events(const std::string& run_dir);

}  // namespace lathe
