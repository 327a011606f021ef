#include "lathe/launch/elastic_supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "lathe/core/error.h"
#include "lathe/core/process_identity.h"
#include "lathe/io/run_directory_lock.h"
#include "lathe/telemetry/goodput_events.h"

namespace lathe {
namespace fs = std::filesystem;

std::string find_program_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string directories = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t begin = 0; begin <= directories.size();) {
    size_t end = directories.find(':', begin);
    if (end == std::string::npos) end = directories.size();
    const std::string candidate = directories.substr(begin, end - begin) + "/" + program;
    if (end > begin && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return "";
}

namespace {

std::atomic<int> supervisor_stop_signal{0};
extern "C" void handle_supervisor_signal(int signal_number) { supervisor_stop_signal.store(signal_number); }

void sleep_seconds(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

// Every process whose session is `session` (the group leader's pid after setsid).
std::vector<pid_t> processes_of_session(pid_t session) {
  std::vector<pid_t> members;
  DIR* proc = ::opendir("/proc");
  if (!proc) return members;
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    const std::string text = process_stat_text(pid);
    const size_t after_name = text.rfind(')');
    if (after_name == std::string::npos) continue;
    char state = 0;
    long parent = 0, group = 0, process_session = 0;
    if (std::sscanf(text.c_str() + after_name + 1, " %c %ld %ld %ld", &state, &parent, &group, &process_session) == 4 &&
        process_session == session && state != 'Z')
      members.push_back(pid);
  }
  ::closedir(proc);
  return members;
}

// Whether pid names a live process (not gone, not a zombie waiting to be reaped).
bool process_is_running(pid_t pid) {
  const std::string text = process_stat_text(pid);
  const size_t after_name = text.rfind(')');
  if (after_name == std::string::npos) return false;
  char state = 0;
  return std::sscanf(text.c_str() + after_name + 1, " %c", &state) == 1 && state != 'Z' && state != 'X';
}

struct WorkerGroup {
  pid_t leader = -1;
  int world = 1;
  std::string attempt;
  std::string heartbeat_dir;
  double started = 0;
  int64_t checkpoint_at_start = -1;
  bool reaped = false;
  int status = 0;
};

// Asks the group's trainers to save a checkpoint and stop: the stop file in its heartbeat directory,
// holding the signal number. Written under a temporary name first so no rank reads it half written.
void request_stop(const WorkerGroup& group, int signal_number) {
  const std::string path = group.heartbeat_dir + "/stop";
  {
    std::ofstream file(path + ".tmp", std::ios::trunc);
    file << signal_number << "\n";
  }
  std::error_code error;
  fs::rename(path + ".tmp", path, error);
}

// SIGKILL to every process of the group's session until none is left; reaps the leader.
void kill_group(WorkerGroup& group) {
  for (int round = 0; round < 200; ++round) {
    std::vector<pid_t> members = processes_of_session(group.leader);
    if (!group.reaped) {
      ::kill(group.leader, SIGKILL);
      if (::waitpid(group.leader, &group.status, WNOHANG) == group.leader) group.reaped = true;
    }
    for (const pid_t pid : members) ::kill(pid, SIGKILL);
    if (members.empty() && group.reaped) return;
    sleep_seconds(0.02);
  }
}

// Whether any rank of the group has written its heartbeat (its trainer is running).
bool any_heartbeat(const WorkerGroup& group) {
  std::error_code error;
  for (int rank = 0; rank < group.world; ++rank)
    if (fs::exists(heartbeat_file(group.heartbeat_dir, rank), error)) return true;
  return false;
}

int64_t newest_complete_checkpoint(const std::string& run_dir) {
  int64_t newest = -1;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(run_dir + "/checkpoints", error)) {
    const std::string name = entry.path().filename().string();
    // Final names only: a checkpoint gets its final name after its manifest is durable.
    if (name.rfind("step_", 0) != 0 || name.find('.') != std::string::npos) continue;
    if (fs::exists(entry.path() / "manifest.json", error))
      newest = std::max<int64_t>(newest, std::atoll(name.c_str() + 5));
  }
  return newest;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return str_cat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return str_cat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return str_cat("ended with status ", status);
}

class Supervisor {
 public:
  explicit Supervisor(const ElasticOptions& options)
      : options_(options),
        capacity_(options.limits.max_nproc, options.cooldown_seconds, options.capacity_file),
        events_(options.run_dir, "launcher", "launcher", 0, 0) {}

  int run();

 private:
  WorkerGroup start_group(const BatchPlan& plan);
  // Watches until the group ends or must be stopped; returns why it stopped.
  enum class Outcome { completed, failed, resize, stop_requested };
  Outcome watch(WorkerGroup& group, std::string& reason, double& failure_time);
  std::optional<std::string> hang_in(const WorkerGroup& group, double now, double& last_heartbeat) const;
  void note(const std::string& line) {
    std::fprintf(options_.log, "lathe launch: %s\n", line.c_str());
    std::fflush(options_.log);
  }

  const ElasticOptions& options_;
  ElasticCapacity capacity_;
  GoodputEventLog events_;
  int attempts_ = 0;
};

WorkerGroup Supervisor::start_group(const BatchPlan& plan) {
  WorkerGroup group;
  group.world = plan.world;
  group.attempt = str_cat("launch", ::getpid(), ".", ++attempts_);
  group.heartbeat_dir = str_cat(options_.run_dir, "/launch/heartbeat-", group.attempt);
  fs::create_directories(group.heartbeat_dir);
  group.checkpoint_at_start = newest_complete_checkpoint(options_.run_dir);

  std::vector<std::string> arguments;
  if (plan.world > 1) {
    const std::string mpirun = options_.mpirun.empty() ? find_program_on_path("mpirun") : options_.mpirun;
    LATHE_CHECK(!mpirun.empty() && ::access(mpirun.c_str(), X_OK) == 0, "cannot run ", plan.world, " workers: mpirun ",
                mpirun.empty() ? "was not found on PATH" : "'" + mpirun + "' is not executable",
                " (install Open MPI: apt-get install openmpi-bin libopenmpi-dev, or run with --max-nproc 1)");
    // mpirun is never signalled on a planned stop (the ranks read the stop file), so its own
    // signal handling (SIGTERM to the ranks only after odls_base_sigkill_timeout, then SIGKILL,
    // and no more output forwarding meanwhile) does not matter.
    arguments = {mpirun, "--oversubscribe", "-np", std::to_string(plan.world)};
    for (const char* variable :
         {"LATHE_ATTEMPT", "LATHE_HEARTBEAT_DIR", "LATHE_SUPERVISOR", "LATHE_RUN_DIR_LOCK_HOLDER"}) {
      arguments.push_back("-x");
      arguments.push_back(variable);
    }
    if (::geteuid() == 0) arguments.insert(arguments.begin() + 1, "--allow-run-as-root");
  }
  arguments.push_back(options_.lathe_binary);
  arguments.push_back("train");
  for (const std::string& argument : options_.train_arguments) arguments.push_back(argument);
  arguments.push_back(str_cat("train.batch_size=", plan.batch_size));
  arguments.push_back(str_cat("train.grad_accum=", plan.grad_accum));

  // A close-on-exec pipe tells a failed exec (the child writes its errno) from a started worker.
  int exec_pipe[2];
  LATHE_CHECK(::pipe2(exec_pipe, O_CLOEXEC) == 0, "cannot create a pipe: ", std::strerror(errno));
  // Open MPI reads an absolute argv[0] as its installation prefix (/bin/mpirun -> "/", an error):
  // name it plainly and execute the path.
  const std::string executable = arguments[0];
  if (plan.world > 1) arguments[0] = "mpirun";
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  LATHE_CHECK(pid >= 0, "cannot fork a worker: ", std::strerror(errno));
  if (pid == 0) {
    ::close(exec_pipe[0]);
    ::setsid();
    ::setenv("LATHE_ATTEMPT", group.attempt.c_str(), 1);
    ::setenv("LATHE_HEARTBEAT_DIR", group.heartbeat_dir.c_str(), 1);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execv(executable.c_str(), argv.data());
    const int error = errno;
    [[maybe_unused]] const ssize_t written = ::write(exec_pipe[1], &error, sizeof error);
    ::_exit(127);
  }
  ::close(exec_pipe[1]);
  int exec_error = 0;
  const ssize_t got = ::read(exec_pipe[0], &exec_error, sizeof exec_error);
  ::close(exec_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof exec_error)) {
    ::waitpid(pid, nullptr, 0);
    throw Error(str_cat("a worker cannot start: ", executable, ": ", std::strerror(exec_error)));
  }
  group.leader = pid;
  group.started = goodput_clock();
  Json extra = Json::object();
  extra.set("attempt", group.attempt);
  extra.set("world", plan.world);
  extra.set("batch_size", plan.batch_size);
  extra.set("grad_accum", plan.grad_accum);
  extra.set("micro_batches_per_rank", plan.micro_batches_per_rank);
  events_.record_point("launch", group.started, extra);
  note(str_cat("attempt ", attempts_, ": ", plan.world, " worker(s); global batch ", plan.batch_size * plan.grad_accum,
               " = ", plan.world, " x ", plan.micro_batches_per_rank, " micro-batch(es) of up to ", plan.batch_size,
               " per rank"));
  return group;
}

// A hang: some rank's heartbeat is older than its timeout. Which rank hung cannot be told from
// heartbeats (the others soon wait for it in a collective and go stale too, each within a step of
// the others), so the reason lists every stale rank and the failure time is the oldest heartbeat.
std::optional<std::string> Supervisor::hang_in(const WorkerGroup& group, double now, double& last_heartbeat) const {
  std::string stale_ranks, what;
  for (int rank = 0; rank < group.world; ++rank) {
    const std::string path = heartbeat_file(group.heartbeat_dir, rank);
    struct stat info {};
    double heartbeat = group.started;
    long long step = -2;  // -2: no heartbeat yet, -1: alive but not training
    if (::stat(path.c_str(), &info) == 0) {
      heartbeat = static_cast<double>(info.st_mtim.tv_sec) + static_cast<double>(info.st_mtim.tv_nsec) * 1e-9;
      std::ifstream file(path);
      if (!(file >> step)) step = -1;
    }
    if (step == kHeartbeatFinished) continue;  // done training; the group is ending on purpose
    const double limit = step < 0 ? options_.startup_timeout_seconds : options_.heartbeat_timeout_seconds;
    if (now - heartbeat <= limit) continue;
    if (stale_ranks.empty() || heartbeat < last_heartbeat) {
      last_heartbeat = heartbeat;
      what = step == -2   ? str_cat("did not start within ", limit, " s")
             : step == -1 ? str_cat("did not begin training within ", limit, " s")
                          : str_cat("sent no heartbeat for ", limit, " s after step ", step, " (hang)");
    }
    stale_ranks += (stale_ranks.empty() ? "" : ", ") + std::to_string(rank);
  }
  if (stale_ranks.empty()) return std::nullopt;
  return str_cat(stale_ranks.find(',') == std::string::npos ? "rank " : "ranks ", stale_ranks, " ", what);
}

// A rank process that ended before finishing training (its heartbeat names its pid). mpirun
// would notice too, but then asks the surviving ranks to stop and waits up to the stop grace
// period for them, while they wait forever for the dead rank inside an all-reduce.
std::optional<std::string> dead_rank_in(const WorkerGroup& group) {
  for (int rank = 0; rank < group.world; ++rank) {
    std::ifstream file(heartbeat_file(group.heartbeat_dir, rank));
    long long step = 0, pid = 0;
    if (!(file >> step >> pid) || step == kHeartbeatFinished || pid <= 0) continue;
    if (!process_is_running(static_cast<pid_t>(pid)))
      return str_cat("rank ", rank, " (pid ", pid, ") died after step ", step);
  }
  return std::nullopt;
}

Supervisor::Outcome Supervisor::watch(WorkerGroup& group, std::string& reason, double& failure_time) {
  // When a rank dies, mpirun gets a moment to end the group itself and report its status (a user
  // error exits 2 and is not retried); after that the supervisor ends it.
  constexpr double kMpirunGraceSeconds = 1.0;
  std::optional<std::pair<double, std::string>> rank_death;
  for (;;) {
    sleep_seconds(options_.poll_seconds);
    const double now = goodput_clock();
    if (::waitpid(group.leader, &group.status, WNOHANG) == group.leader) {
      group.reaped = true;
      failure_time = rank_death ? rank_death->first : now;
      if (WIFEXITED(group.status) && WEXITSTATUS(group.status) == 0) return Outcome::completed;
      reason = (rank_death ? rank_death->second + "; " : "") + "worker group " + describe_status(group.status);
      return Outcome::failed;
    }
    if (supervisor_stop_signal.load() != 0) return Outcome::stop_requested;
    if (group.world > 1 && !rank_death)
      if (auto dead = dead_rank_in(group)) rank_death = {{now, *dead}};
    if (rank_death && now - rank_death->first > kMpirunGraceSeconds) {
      reason = rank_death->second;
      failure_time = rank_death->first;
      return Outcome::failed;
    }
    double last_heartbeat = 0;
    if (auto hang = hang_in(group, now, last_heartbeat)) {
      reason = *hang;
      failure_time = last_heartbeat;
      return Outcome::failed;
    }
    const auto better = plan_world(options_.limits, capacity_.available(now), options_.batch_size, options_.grad_accum);
    if (better && better->world > group.world &&
        newest_complete_checkpoint(options_.run_dir) > group.checkpoint_at_start) {
      reason = str_cat("capacity for ", better->world, " workers (running ", group.world, ")");
      failure_time = now;
      return Outcome::resize;
    }
  }
}

int Supervisor::run() {
  // SIGHUP (the terminal closed) stops the job like Ctrl-C: the group would otherwise train on unwatched.
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP}) std::signal(signal_number, handle_supervisor_signal);
  supervisor_stop_signal.store(0);
  events_.record_point("job_start", goodput_clock());
  int failures = 0;
  std::optional<std::pair<double, std::string>> disruption;  // (time, cause) awaiting the next start
  bool waiting_noted = false;
  for (;;) {
    const double now = goodput_clock();
    const auto plan = plan_world(options_.limits, capacity_.available(now), options_.batch_size, options_.grad_accum);
    if (!plan) {
      if (supervisor_stop_signal.load() != 0) return 128 + supervisor_stop_signal.load();
      if (!waiting_noted)
        note(str_cat("waiting for capacity: ", capacity_.available(now), " slot(s) available, --min-nproc is ",
                     options_.limits.min_nproc));
      waiting_noted = true;
      sleep_seconds(options_.poll_seconds);
      continue;
    }
    waiting_noted = false;
    WorkerGroup group = start_group(*plan);
    if (disruption) {
      Json extra = Json::object();
      extra.set("cause", disruption->second);
      events_.record_interval("recovery", disruption->first, group.started, extra);
      disruption.reset();
    }
    std::string reason;
    double failure_time = 0;
    const Outcome outcome = watch(group, reason, failure_time);
    const double detected = goodput_clock();
    const bool trainers_started = any_heartbeat(group);
    if (outcome == Outcome::completed) {
      Json extra = Json::object();
      extra.set("ok", true);
      events_.record_point("job_finish", detected, extra);
      note(str_cat("training completed after ", failures, " failure(s) and ", attempts_, " attempt(s)"));
      fs::remove_all(group.heartbeat_dir);
      return 0;
    }
    if (outcome == Outcome::stop_requested || outcome == Outcome::resize) {
      // A graceful stop first: every rank reads the stop file within 0.1 s, the ranks agree on a
      // step, save one checkpoint and exit (train/external_stop.h).
      request_stop(group, outcome == Outcome::resize ? SIGTERM : supervisor_stop_signal.load());
      const double deadline = goodput_clock() + options_.stop_grace_seconds;
      while (goodput_clock() < deadline && ::waitpid(group.leader, &group.status, WNOHANG) != group.leader)
        sleep_seconds(0.02);
      if (::kill(group.leader, 0) != 0 || ::waitpid(group.leader, &group.status, WNOHANG) == group.leader)
        group.reaped = true;
    }
    kill_group(group);
    fs::remove_all(group.heartbeat_dir);
    if (outcome == Outcome::stop_requested) {
      const int signal_number = supervisor_stop_signal.load();
      Json extra = Json::object();
      extra.set("ok", false);
      events_.record_point("job_finish", goodput_clock(), extra);
      note(str_cat("stopped by signal ", signal_number, "; run the same command again to resume"));
      return 128 + signal_number;
    }
    Json extra = Json::object();
    extra.set("attempt", group.attempt);
    extra.set("reason", reason);
    if (outcome == Outcome::resize) {
      extra.set("from", group.world);
      events_.record_point("resize", failure_time, extra);
      note("resizing: " + reason);
      disruption = {failure_time, "resize"};
      continue;
    }
    extra.set("detected", events_.relative(detected));
    events_.record_point("failure", failure_time, extra);
    // The very first group never reached its trainers' first event: nothing will start it later.
    LATHE_CHECK(attempts_ > 1 || trainers_started, "the workers cannot start (", reason,
                ", before any rank began; see the output above); not restarting");
    // Exit code 2 is lathe's user error (bad config, diverged loss): a restart would fail the same way.
    LATHE_CHECK(reason != "worker group exited with code 2",
                "the workers stopped with an error (exit code 2, printed above); not restarting");
    ++failures;
    note(str_cat("failure ", failures, ": ", reason, "; stopped the group"));
    LATHE_CHECK(failures <= options_.max_restarts, "giving up after ", failures, " failures (--max-restarts ",
                options_.max_restarts, "); the newest checkpoint in ", options_.run_dir, "/checkpoints is intact");
    capacity_.slot_failed(detected);
    disruption = {failure_time, "failure"};
  }
}

}  // namespace

int run_elastic_supervisor(const ElasticOptions& options) {
  validate_elastic_limits(options.limits);
  // One job per run directory. The worker group inherits the lock (so it stays held until the last
  // worker is gone, even when the supervisor is SIGKILLed) and is told who holds it.
  const RunDirectoryLock lock =
      RunDirectoryLock::acquire(options.run_dir, "lathe launch", /*inherited_by_children=*/true);
  ::setenv("LATHE_RUN_DIR_LOCK_HOLDER", std::to_string(::getpid()).c_str(), 1);
  // The trainers stop when this process is gone (train/external_stop.h).
  ::setenv("LATHE_SUPERVISOR", process_identity(::getpid()).c_str(), 1);
  struct Cleanup {
    std::string launch_dir;
    ~Cleanup() {
      for (const int signal_number : {SIGINT, SIGTERM, SIGHUP}) std::signal(signal_number, SIG_DFL);
      std::error_code ignored;
      fs::remove(launch_dir, ignored);  // the heartbeat directories' parent, when empty
    }
  } cleanup{options.run_dir + "/launch"};
  Supervisor supervisor(options);
  return supervisor.run();
}

}  // namespace lathe
