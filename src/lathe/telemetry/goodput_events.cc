#include "lathe/telemetry/goodput_events.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lathe/core/error.h"
#include "lathe/core/launcher.h"
#include "lathe/telemetry/metrics_log.h"

namespace lathe {
namespace fs = std::filesystem;

double goodput_clock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

// When this process started, in Unix seconds: /proc/self/stat field 22 counts clock ticks since
// boot; CLOCK_BOOTTIME says how long ago boot was. Falls back to now (10 ms resolution is plenty:
// the interval it starts lasts seconds).
double process_start_time() {
  const double now = goodput_clock();
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t after_name = text.rfind(')');  // the command name may hold spaces
  timespec boot{};
  if (after_name == std::string::npos || clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return now;
  std::istringstream fields(text.substr(after_name + 2));
  std::string field;
  for (int index = 3; index <= 22 && fields >> field; ++index)
    if (index == 22) {
      const double since_boot = std::strtod(field.c_str(), nullptr) / static_cast<double>(sysconf(_SC_CLK_TCK));
      const double uptime = static_cast<double>(boot.tv_sec) + static_cast<double>(boot.tv_nsec) * 1e-9;
      const double start = now - (uptime - since_boot);
      return start <= now && start > now - 86400.0 * 365 ? start : now;
    }
  return now;
}

std::string attempt_from_environment() {
  if (const char* attempt = std::getenv("LATHE_ATTEMPT"); attempt && *attempt) return attempt;
  if (const char* job = std::getenv("OMPI_MCA_ess_base_jobid"); job && *job) return std::string("mpi") + job;
  return "pid" + std::to_string(::getpid());
}

}  // namespace

GoodputEventLog::GoodputEventLog(const std::string& run_dir, const std::string& role, const std::string& attempt,
                                 int rank, int world)
    : log_(std::make_unique<MetricsLog>(run_dir + "/events/" + role + "-" + std::to_string(::getpid()) + ".jsonl")),
      epoch_(goodput_clock()) {
  char epoch[32];
  std::snprintf(epoch, sizeof epoch, "%.6f", epoch_);
  Json extra = Json::object();
  extra.set("epoch", std::string(epoch));
  extra.set("role", role);
  extra.set("pid", static_cast<int64_t>(::getpid()));
  extra.set("attempt", attempt);
  extra.set("rank", rank);
  extra.set("world", world);
  record_point("process", goodput_clock(), extra);
}

GoodputEventLog::~GoodputEventLog() = default;

const std::string& GoodputEventLog::path() const { return log_->path(); }

void GoodputEventLog::record_interval(const std::string& kind, double start, double end, const Json& extra) {
  Json row = Json::object();
  row.set("kind", kind);
  row.set("start", start - epoch_);
  row.set("end", std::max(start, end) - epoch_);
  if (extra.is_object())
    for (const auto& [key, value] : extra.members()) row.set(key, value);
  log_->append(row);
}

void GoodputEventLog::record_point(const std::string& kind, double time, const Json& extra) {
  Json row = Json::object();
  row.set("kind", kind);
  row.set("time", time - epoch_);
  if (extra.is_object())
    for (const auto& [key, value] : extra.members()) row.set(key, value);
  log_->append(row);
}

std::string heartbeat_file(const std::string& heartbeat_dir, int rank) {
  return heartbeat_dir + "/rank" + std::to_string(rank);
}

int process_rank_from_environment() { return launch_environment().rank; }
int process_world_from_environment() { return launch_environment().world_size; }

TrainingEvents::TrainingEvents(const std::string& run_dir)
    : run_dir_(run_dir), rank_(process_rank_from_environment()), process_start_(process_start_time()) {
  if (const char* directory = std::getenv("LATHE_HEARTBEAT_DIR"); directory && *directory) {
    heartbeat_path_ = heartbeat_file(directory, rank_);
    touch_heartbeat(-1);  // alive, not yet training
  }
}

TrainingEvents::~TrainingEvents() = default;

void TrainingEvents::record(const std::string& kind, double start, double end, const Json& extra) {
  if (log_)
    log_->record_interval(kind, start, end, extra);
  else
    pending_.push_back({kind, start, end, extra});
}

void TrainingEvents::restored(double start, int64_t step) {
  Json extra = Json::object();
  extra.set("step", step);
  record("restore", start, now(), extra);
}

void TrainingEvents::startup(double start) { record("startup", start, now()); }

void TrainingEvents::training_begins() {
  log_ = std::make_unique<GoodputEventLog>(run_dir_, "rank" + std::to_string(rank_), attempt_from_environment(), rank_,
                                           process_world_from_environment());
  for (const Pending& event : pending_) log_->record_interval(event.kind, event.start, event.end, event.extra);
  pending_.clear();
  log_->record_interval("initialization", process_start_, now());
  data_seconds_ = 0;
}

void TrainingEvents::step_done(double start, int64_t step, int64_t first_sample) {
  Json extra = Json::object();
  extra.set("step", step);
  extra.set("first_sample", first_sample);
  extra.set("data_seconds", data_seconds_);
  record("step", start, now(), extra);
  data_seconds_ = 0;
  touch_heartbeat(step);
}

void TrainingEvents::evaluation(double start) { record("evaluation", start, now()); }

void TrainingEvents::checkpoint(double start, int64_t step) {
  Json extra = Json::object();
  extra.set("step", step);
  record("checkpoint", start, now(), extra);
}

void TrainingEvents::finished(bool interrupted) {
  touch_heartbeat(kHeartbeatFinished);
  Json extra = Json::object();
  extra.set("interrupted", interrupted);
  if (log_) log_->record_point("job_end", now(), extra);
}

// The supervisor reads the file's modification time, the step and the pid in it ("<step> <pid>");
// writing a temporary file
// and renaming it over the old one means a reader never sees a half-written number (a worker can
// be stopped between any two syscalls).
void TrainingEvents::touch_heartbeat(int64_t step) {
  if (heartbeat_path_.empty()) return;
  const std::string temporary = heartbeat_path_ + ".tmp";
  const int descriptor = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (descriptor < 0) return;  // the supervisor then sees a stale heartbeat: a clear failure there
  const std::string text = std::to_string(step) + " " + std::to_string(::getpid()) + "\n";
  const bool written = ::write(descriptor, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(descriptor);
  if (written) ::rename(temporary.c_str(), heartbeat_path_.c_str());
}

std::vector<Json> read_goodput_events(const std::string& run_dir) {
  std::vector<Json> events;
  const fs::path directory = fs::path(run_dir) / "events";
  std::error_code error;
  if (!fs::is_directory(directory, error)) return events;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(directory, error))
    if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    double epoch = 0;
    for (Json& row : read_metrics_log(file.string())) {
      LATHE_CHECK(row.is_object() && row.find("kind") && row.get("kind").is_string(), "goodput event file ",
                  file.string(), ": an event without a \"kind\" string: ", row.dump(0));
      row.set("file", file.filename().string());
      if (const Json* value = row.find("epoch"); value && value->is_string())
        epoch = std::strtod(value->as_string().c_str(), nullptr);
      for (const char* key : {"time", "start", "end", "detected"})
        if (const Json* value = row.find(key); value && value->is_number()) row.set(key, value->as_number() + epoch);
      events.push_back(std::move(row));
    }
  }
  return events;
}

}  // namespace lathe
