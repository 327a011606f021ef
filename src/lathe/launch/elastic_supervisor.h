// The elastic supervisor behind `lathe launch`: runs a group of `lathe train` workers, watches
// them, and on a failure stops the whole group and restarts it from the newest complete
// checkpoint with the workers that are available (launch/elastic_plan.h), scaling back up when
// capacity returns.
//
// Worker group: world 1 runs `lathe train ARGS...` directly; world W > 1 runs `mpirun -np W
// lathe train ARGS...` (Open MPI; as root with --allow-run-as-root; --oversubscribe). ARGS get
// train.batch_size=B train.grad_accum=A appended (the run's own: the global batch is the same in
// every world size, each rank's gradient accumulation adapts, launch/elastic_plan.h). The group runs in its
// own session (setsid): Open MPI puts each rank in its own process group, so stopping the group
// means SIGKILL to every process of that session.
// Environment of the workers: LATHE_ATTEMPT (goodput attempt id), LATHE_HEARTBEAT_DIR (each rank
// rewrites <dir>/rank<r> after every step, train/goodput_events.h; <dir>/stop asks them to stop),
// LATHE_SUPERVISOR (this process's identity: the workers stop when it is gone, e.g. SIGKILLed,
// train/external_stop.h) and LATHE_RUN_DIR_LOCK_HOLDER (this pid: the supervisor holds the run
// directory's lock for the whole job, io/run_directory_lock.h, and the group inherits it, so a
// second job on the run directory is refused).
//
// Failures: the group exits non-zero or is killed by a signal (a rank crashed or was SIGKILLed);
// a rank's heartbeat is older than heartbeat_timeout (a hang; the failure time is the last
// heartbeat); a rank has not begun training within startup_timeout. Not restarted (one clear
// lathe::Error instead): exit code 2 (the workers reported a user error, e.g. a bad config), a
// worker executable that cannot be started, mpirun missing for W > 1, more than max_restarts
// failures. The supervisor never touches checkpoints: the trainer's write protocol keeps the last
// complete one intact whatever moment a worker dies (train/checkpoint.h).
//
// Stopping the group (a stop request or a resize): the supervisor writes the stop file; every rank
// reads it within 0.1 s, the ranks agree on a step (an all-reduce after each step), save one
// checkpoint and exit; whatever is left after stop_grace_seconds is SIGKILLed. mpirun is never
// signalled: Open MPI 4.1 forwards SIGTERM to the ranks only after odls_base_sigkill_timeout and
// stops forwarding their output meanwhile, so ranks printing progress would block.
// Scale-up: while the group runs with fewer workers than capacity allows, the supervisor waits
// for the group's next complete checkpoint, then stops it and restarts with more workers
// ("resize" event). SIGINT/SIGTERM/SIGHUP to the supervisor stop the group that way and end the job.
//
// Every decision is an event in <run_dir>/events/launcher-<pid>.jsonl (goodput accounting) and a
// line on `log`.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "lathe/launch/elastic_plan.h"

namespace lathe {

struct ElasticOptions {
  ElasticLimits limits;
  double heartbeat_timeout_seconds = 30;
  double startup_timeout_seconds = 600;  // process start until the first step begins
  int max_restarts = 5;                  // failures tolerated (resizes do not count)
  double cooldown_seconds = 30;          // a failed slot is unavailable for this long
  std::string capacity_file;             // optional: slots available now (an integer)
  double poll_seconds = 0.1;
  double stop_grace_seconds = 20;  // SIGTERM -> SIGKILL

  std::string lathe_binary;                  // the `lathe` executable the workers run
  std::string mpirun;                        // empty: search PATH (needed only for world > 1)
  std::vector<std::string> train_arguments;  // `lathe train` arguments (config file, overrides)
  std::string run_dir;                       // the run's directory (events, checkpoints)
  int64_t batch_size = 1;                    // train.batch_size of the run (elastic_plan.h)
  int64_t grad_accum = 1;                    // train.grad_accum of the run
  std::FILE* log = stderr;
};

// Runs the job to completion: returns 0 when training finished, 128 + signal when the supervisor
// was asked to stop. Throws lathe::Error as described above.
int run_elastic_supervisor(const ElasticOptions& options);

// The full path of `program` found on PATH, or "" when it is not there.
std::string find_program_on_path(const std::string& program);

}  // namespace lathe
