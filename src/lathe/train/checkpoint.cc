#include "lathe/train/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "lathe/core/clock.h"
#include "lathe/core/parallel.h"
#include "lathe/core/version.h"
#include "lathe/device/device_tensor.h"
#include "lathe/io/checksum.h"
#include "lathe/io/durable_file.h"
#include "lathe/io/tensor_bytes.h"

namespace lathe {

namespace fs = std::filesystem;

namespace {

constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kTrainerStateFile = "trainer_state.json";
constexpr const char* kConfigFile = "config.yaml";
constexpr const char* kManifestFile = "manifest.json";
constexpr const char* kRequiredFiles[] = {kModelFile, kOptimizerFile, kTrainerStateFile, kConfigFile};
constexpr const char* kFormatName = "lathe-checkpoint";
constexpr int64_t kFormatVersion = 1;
constexpr const char* kTemporaryMarker = ".tmp.";

std::string join_path(const std::string& directory, const std::string& name) { return directory + "/" + name; }

// The step of a final checkpoint directory name ("step_00000100"), nullopt for anything else
// (temporary directories, stray files, non-canonical spellings).
std::optional<int64_t> parse_checkpoint_step(const std::string& name) {
  if (name.rfind("step_", 0) != 0) return std::nullopt;
  std::string digits = name.substr(5);
  if (digits.size() < 8 || digits.size() > 18) return std::nullopt;
  for (char c : digits)
    if (c < '0' || c > '9') return std::nullopt;
  int64_t step = std::stoll(digits);
  if (checkpoint_directory_name(step) != name) return std::nullopt;
  return step;
}

// The writer's pid of a temporary directory "step_00000100.tmp.<pid>[...]", nullopt otherwise.
std::optional<long> parse_temporary_writer(const std::string& name) {
  size_t marker = name.find(kTemporaryMarker);
  if (name.rfind("step_", 0) != 0 || marker == std::string::npos) return std::nullopt;
  size_t begin = marker + std::strlen(kTemporaryMarker);
  size_t end = begin;
  while (end < name.size() && end - begin < 10 && name[end] >= '0' && name[end] <= '9') ++end;
  if (end == begin) return std::nullopt;
  return std::stol(name.substr(begin, end - begin));
}

// Final checkpoint directories under `directory`, oldest step first.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& directory) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code error;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    std::string name = it->path().filename().string();
    std::error_code ignored;
    if (auto step = parse_checkpoint_step(name); step && it->is_directory(ignored)) found.emplace_back(*step, name);
  }
  LATHE_CHECK(!error, "cannot list checkpoint directory ", directory, ": ", error.message());
  std::sort(found.begin(), found.end());
  return found;
}

int64_t manifest_integer(const Json& value, const std::string& what) {
  double number = value.is_number() ? value.as_number() : -1;
  LATHE_CHECK(std::isfinite(number) && number >= 0 && number <= 9007199254740992.0 && std::floor(number) == number,
              "manifest.json: ", what, " must be a non-negative integer");
  return static_cast<int64_t>(number);
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// Throws lathe::Error with the reason (without the directory) when the checkpoint does not
// verify. expected_step < 0: any step.
int64_t verify_checkpoint_files(const std::string& directory, int64_t expected_step) {
  std::string manifest_path = join_path(directory, kManifestFile);
  std::error_code error;
  auto manifest_bytes = fs::file_size(manifest_path, error);
  LATHE_CHECK(!error, "missing ", kManifestFile, " (incomplete write?)");
  // A manifest lists a handful of files; anything large is not one (and is not read into memory).
  LATHE_CHECK(manifest_bytes <= (1u << 20), kManifestFile, " is ", manifest_bytes, " bytes, too large for a manifest");
  Json manifest;
  try {
    manifest = Json::parse(read_file_contents(manifest_path));
  } catch (const Error& error) {
    throw error.with_context(kManifestFile);
  }
  LATHE_CHECK(manifest.is_object(), kManifestFile, " must be a JSON object");
  const Json& format = manifest.get("format");
  LATHE_CHECK(format.is_string() && format.as_string() == kFormatName, kManifestFile, ": \"format\" must be \"",
              kFormatName, "\"");
  int64_t version = manifest_integer(manifest.get("format_version"), "format_version");
  LATHE_CHECK(version == kFormatVersion, kManifestFile, ": format_version ", version,
              " is not supported (this build reads ", kFormatVersion, ")");
  int64_t step = manifest_integer(manifest.get("step"), "step");
  LATHE_CHECK(expected_step < 0 || step == expected_step, kManifestFile, ": step ", step,
              " does not match the directory name");
  const Json& files = manifest.get("files");
  LATHE_CHECK(files.is_object(), kManifestFile, ": \"files\" must be an object");
  for (const char* required : kRequiredFiles)
    LATHE_CHECK(files.find(required), kManifestFile, " does not list ", required);

  // Sizes first (cheap), then checksums.
  std::vector<std::pair<std::string, uint32_t>> checksums;
  for (const auto& [name, entry] : files.members()) {
    LATHE_CHECK(is_plain_file_name(name), kManifestFile, ": \"", name, "\" is not a file name");
    LATHE_CHECK(entry.is_object(), kManifestFile, ": entry of ", name, " must be an object");
    int64_t bytes = manifest_integer(entry.get("bytes"), name + " bytes");
    const Json& crc = entry.get("crc32c");
    LATHE_CHECK(crc.is_string(), kManifestFile, ": ", name, " crc32c must be a string");
    checksums.emplace_back(name, parse_crc32c(crc.as_string(), str_cat(kManifestFile, ": ", name, " crc32c")));
    std::string path = join_path(directory, name);
    auto size = fs::file_size(path, error);
    LATHE_CHECK(!error, name, " is missing");
    LATHE_CHECK(static_cast<int64_t>(size) == bytes, name, " is ", size, " bytes, the manifest says ", bytes,
                " (truncated?)");
  }
  for (const auto& [name, expected] : checksums) {
    uint32_t actual = crc32c_of_file(join_path(directory, name));
    LATHE_CHECK(actual == expected, name, " checksum mismatch (manifest ", format_crc32c(expected), ", file ",
                format_crc32c(actual), ")");
  }
  return step;
}

int64_t step_of_directory(const std::string& directory) {
  return parse_checkpoint_step(fs::path(directory).filename().string()).value_or(-1);
}

NamedTensors read_all_tensors(const std::string& path) {
  SafetensorsFile file = SafetensorsFile::open(path);
  NamedTensors tensors;
  for (const std::string& name : file.names()) tensors.emplace_back(name, file.read(name));
  return tensors;
}

NamedTensorViews views_of(const NamedTensors& tensors) {
  NamedTensorViews views;
  views.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) views.emplace_back(name, tensor.view());
  return views;
}

// Copies `source` into `target` (same shape and dtype, contiguous). Large contiguous tensors are
// copied by all threads: this is the part of a save the trainer waits for. Tensors on the GPU
// (train.device=cuda) come back through one device-to-host copy each.
void copy_into(const TensorView& source, const Tensor& target) {
  if (source.device == Device::cuda) {
    cuda::copy(target, source);
    return;
  }
  int64_t bytes = tensor_byte_size(source);
  if (!source.is_contiguous() || bytes < (int64_t{1} << 20)) {
    copy_to_contiguous(source, target.view().data);
    return;
  }
  const auto* from = static_cast<const char*>(source.data);
  auto* to = static_cast<char*>(target.view().data);
  parallel_for(bytes, int64_t{1} << 18, [&](int64_t begin, int64_t end) {
    std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin));
  });
}

}  // namespace

std::string checkpoint_directory_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return name;
}

CheckpointContents LoadedCheckpoint::contents() const {
  CheckpointContents contents;
  contents.step = step;
  contents.model = views_of(model);
  contents.optimizer = views_of(optimizer);
  contents.trainer_state = trainer_state;
  contents.config_yaml = config_yaml;
  return contents;
}

// ---------------------------------------------------------------------------------------------
// Reading

void verify_checkpoint(const std::string& checkpoint_dir) {
  try {
    verify_checkpoint_files(checkpoint_dir, step_of_directory(checkpoint_dir));
  } catch (const Error& error) {
    throw error.with_context(str_cat("checkpoint ", checkpoint_dir));
  }
}

std::optional<std::string> find_latest_checkpoint(const std::string& checkpoints_dir, std::ostream& warnings) {
  std::error_code error;
  if (!fs::exists(checkpoints_dir, error)) return std::nullopt;
  LATHE_CHECK(fs::is_directory(checkpoints_dir), "checkpoint directory ", checkpoints_dir, " is not a directory");
  auto checkpoints = list_checkpoints(checkpoints_dir);
  for (auto it = checkpoints.rbegin(); it != checkpoints.rend(); ++it) {
    std::string path = join_path(checkpoints_dir, it->second);
    try {
      verify_checkpoint_files(path, it->first);
      return path;
    } catch (const Error& problem) {
      warnings << "warning: skipping checkpoint " << it->second << ": " << problem.what() << "\n";
    }
  }
  return std::nullopt;
}

LoadedCheckpoint load_checkpoint(const std::string& checkpoint_dir) {
  LoadedCheckpoint loaded;
  loaded.directory = checkpoint_dir;
  std::string context = str_cat("checkpoint ", checkpoint_dir);
  try {
    loaded.step = verify_checkpoint_files(checkpoint_dir, step_of_directory(checkpoint_dir));
    loaded.trainer_state = Json::parse(read_file_contents(join_path(checkpoint_dir, kTrainerStateFile)));
  } catch (const Error& error) {
    throw error.with_context(context);
  }
  loaded.config_yaml = read_file_contents(join_path(checkpoint_dir, kConfigFile));
  // Safetensors errors already name the file (and tensor) by full path.
  loaded.model = read_all_tensors(join_path(checkpoint_dir, kModelFile));
  loaded.optimizer = read_all_tensors(join_path(checkpoint_dir, kOptimizerFile));
  return loaded;
}

// ---------------------------------------------------------------------------------------------
// Writing

struct CheckpointManager::Snapshot {
  int64_t step = 0;
  NamedTensors model;
  NamedTensors optimizer;
  Json trainer_state;
  std::string config_yaml;
  std::vector<StagedCheckpointFile> staged_files;
};

CheckpointManagerOptions CheckpointManagerOptions::from_config(const CheckpointSection& section) {
  CheckpointManagerOptions options;
  options.keep_last = section.keep_last;
  options.async = section.async;
  return options;
}

CheckpointManager::CheckpointManager(std::string checkpoints_dir, CheckpointManagerOptions options)
    : directory_(std::move(checkpoints_dir)), options_(options), snapshot_(std::make_unique<Snapshot>()) {
  LATHE_CHECK(options_.keep_last >= 0, "checkpoint keep_last must be >= 0 (0 keeps all), got ", options_.keep_last);
  LATHE_CHECK(options_.log != nullptr, "checkpoint manager needs a log stream");
  std::error_code create_error, check_error, error;
  fs::create_directories(directory_, create_error);
  LATHE_CHECK(fs::is_directory(directory_, check_error), "cannot create checkpoint directory ", directory_, ": ",
              create_error ? create_error.message() : "a file of that name exists");
  // A temporary directory whose writer is gone can never complete: remove it. One whose writer
  // is alive belongs to another process's write in flight. (Our own pid: a previous manager in
  // this process that was destroyed, since one manager owns a directory at a time.)
  std::vector<fs::path> temporaries;
  for (fs::directory_iterator it(directory_, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    if (parse_temporary_writer(it->path().filename().string()) && it->is_directory(ignored))
      temporaries.push_back(it->path());
  }
  LATHE_CHECK(!error, "cannot list checkpoint directory ", directory_, ": ", error.message());
  for (const fs::path& path : temporaries) {
    std::optional<long> pid = parse_temporary_writer(path.filename().string());
    bool alive = *pid != ::getpid() && (::kill(static_cast<pid_t>(*pid), 0) == 0 || errno == EPERM);
    if (alive) continue;
    fs::remove_all(path, error);
    if (error)
      *options_.log << "warning: cannot remove stale checkpoint directory " << path.string() << ": " << error.message()
                    << "\n";
    else
      *options_.log << "note: removed stale checkpoint directory " << path.string() << " (writer process " << *pid
                    << " is gone)\n";
  }
}

CheckpointManager::~CheckpointManager() {
  try {
    wait();
  } catch (const std::exception& error) {
    *options_.log << "error: checkpoint write failed: " << error.what() << "\n";
  }
}

void CheckpointManager::wait() {
  if (writer_.joinable()) writer_.join();
  if (write_error_) std::rethrow_exception(std::exchange(write_error_, nullptr));
}

CheckpointSaveStats CheckpointManager::last_stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

void CheckpointManager::save(const CheckpointContents& contents) {
  const double start = now_seconds();
  wait();
  double wait_seconds = seconds_since(start);
  LATHE_CHECK(contents.step >= 0, "checkpoint step must be >= 0, got ", contents.step);
  for (const NamedTensorViews* list : {&contents.model, &contents.optimizer}) {
    std::set<std::string> names;
    for (const auto& [name, view] : *list) {
      LATHE_CHECK(!name.empty() && name != "__metadata__", "checkpoint step ", contents.step,
                  ": invalid tensor name \"", name, "\"");
      LATHE_CHECK(names.insert(name).second, "checkpoint step ", contents.step, ": tensor \"", name, "\" given twice");
    }
  }

  const double snapshot_start = now_seconds();
  take_snapshot(contents);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_ = CheckpointSaveStats{contents.step, 0, wait_seconds, seconds_since(snapshot_start), 0, false};
  }
  // Anything but lathe::Error (filesystem_error, bad_alloc) becomes one, naming the step.
  auto write_as_lathe_error = [this] {
    try {
      write_snapshot();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& error) {
      throw_error("checkpoint step ", snapshot_->step, ": ", error.what());
    }
  };
  if (!options_.async) {
    write_as_lathe_error();
    return;
  }
  writer_ = std::thread([this, write_as_lathe_error] {
    try {
      write_as_lathe_error();
    } catch (...) {
      write_error_ = std::current_exception();
    }
  });
}

void CheckpointManager::take_snapshot(const CheckpointContents& contents) {
  // Reuse the previous snapshot's buffers where shape and dtype match (the usual case: the same
  // model every save), which saves the allocation and page faults of a fresh copy.
  auto copy_list = [](const NamedTensorViews& source, NamedTensors& target) {
    NamedTensors result;
    result.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      const TensorView& view = source[i].second;
      Tensor buffer;
      if (i < target.size() && target[i].second.shape() == view.shape && target[i].second.dtype() == view.dtype)
        buffer = std::move(target[i].second);
      else
        buffer = Tensor::empty(view.shape, view.dtype);
      copy_into(view, buffer);
      result.emplace_back(source[i].first, std::move(buffer));
    }
    target = std::move(result);
  };
  snapshot_->step = contents.step;
  copy_list(contents.model, snapshot_->model);
  copy_list(contents.optimizer, snapshot_->optimizer);
  snapshot_->trainer_state = contents.trainer_state;
  snapshot_->config_yaml = contents.config_yaml;
  snapshot_->staged_files = contents.staged_files;
}

namespace {

// Moves a finished temporary directory to its final name. An existing checkpoint of the same
// step is swapped out atomically (renameat2 RENAME_EXCHANGE) and then deleted; on filesystems
// without the exchange it is moved aside first (a crash in that window loses only the older copy
// of this one step).
void publish_checkpoint(const std::string& temporary, const std::string& final_path, const std::string& parent) {
  if (!fs::exists(final_path)) {
    rename_durably(temporary, final_path);
    return;
  }
  if (::renameat2(AT_FDCWD, temporary.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0) {
    sync_directory(parent);
    fs::remove_all(temporary);  // now holds the replaced checkpoint
    return;
  }
  std::string aside = str_cat(temporary, ".replaced");
  rename_durably(final_path, aside);
  rename_durably(temporary, final_path);
  fs::remove_all(aside);
}

}  // namespace

void CheckpointManager::write_snapshot() {
  const double start = now_seconds();
  const Snapshot& snapshot = *snapshot_;
  std::string name = checkpoint_directory_name(snapshot.step);
  std::string final_path = join_path(directory_, name);
  std::string temporary = str_cat(final_path, kTemporaryMarker, ::getpid());
  fs::remove_all(temporary);
  fs::create_directory(temporary);
  int64_t total_bytes = 0;
  try {
    Json files = Json::object();
    auto record = [&](const char* file, const FileDigest& digest) {
      Json entry = Json::object();
      entry.set("bytes", digest.bytes);
      entry.set("crc32c", format_crc32c(digest.crc32c));
      files.set(file, std::move(entry));
      total_bytes += digest.bytes;
    };
    auto pause_for_tests = [&](const char* file) {
      if (options_.test_hook_before_file) options_.test_hook_before_file(file);
    };
    std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", std::to_string(snapshot.step)}};
    pause_for_tests(kModelFile);
    record(kModelFile, write_safetensors(join_path(temporary, kModelFile), views_of(snapshot.model), metadata));
    pause_for_tests(kOptimizerFile);
    record(kOptimizerFile,
           write_safetensors(join_path(temporary, kOptimizerFile), views_of(snapshot.optimizer), metadata));
    pause_for_tests(kTrainerStateFile);
    record(kTrainerStateFile,
           write_file_synced(join_path(temporary, kTrainerStateFile), snapshot.trainer_state.dump(2) + "\n"));
    pause_for_tests(kConfigFile);
    record(kConfigFile, write_file_synced(join_path(temporary, kConfigFile), snapshot.config_yaml));
    for (const StagedCheckpointFile& staged : snapshot.staged_files) {
      LATHE_CHECK(is_plain_file_name(staged.name) && !files.find(staged.name), "checkpoint step ", snapshot.step,
                  ": staged file name \"", staged.name, "\" is not a new plain file name");
      fs::rename(staged.path, join_path(temporary, staged.name));
      record(staged.name.c_str(), staged.digest);
      std::error_code not_empty;
      fs::remove(fs::path(staged.path).parent_path(), not_empty);  // the staging directory, once empty
    }
    pause_for_tests(kManifestFile);
    Json manifest = Json::object();
    manifest.set("format", kFormatName);
    manifest.set("format_version", kFormatVersion);
    manifest.set("step", snapshot.step);
    manifest.set("lathe_version", lathe_version());
    manifest.set("lathe_commit", lathe_git_commit());
    manifest.set("files", std::move(files));
    total_bytes += write_file_synced(join_path(temporary, kManifestFile), manifest.dump(2) + "\n").bytes;
    sync_directory(temporary);
    publish_checkpoint(temporary, final_path, directory_);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temporary, ignored);
    throw;
  }

  // Keep the newest keep_last by step, and always the one just written.
  if (options_.keep_last > 0) {
    auto checkpoints = list_checkpoints(directory_);
    int64_t deletable = static_cast<int64_t>(checkpoints.size()) - options_.keep_last;
    for (int64_t i = 0; i < deletable; ++i) {
      if (checkpoints[i].second == name) continue;
      // Renamed first, so a crash mid-delete leaves a temporary directory, never a broken
      // checkpoint under a final name.
      std::string old_path = join_path(directory_, checkpoints[i].second);
      std::string doomed = str_cat(old_path, kTemporaryMarker, ::getpid(), ".deleting");
      std::error_code error;
      fs::rename(old_path, doomed, error);
      if (!error) fs::remove_all(doomed, error);
      if (error)
        *options_.log << "warning: cannot delete old checkpoint " << old_path << ": " << error.message() << "\n";
    }
  }
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.bytes = total_bytes;
  stats_.write_seconds = seconds_since(start);
  stats_.completed = true;
}

std::string resolve_checkpoint_directory(const std::string& path, std::ostream& warnings) {
  std::error_code error;
  LATHE_CHECK(std::filesystem::exists(path, error), "'", path,
              "' does not exist (give a run directory or a checkpoint directory)");
  if (std::filesystem::exists(std::filesystem::path(path) / kManifestFile, error)) return path;
  const std::string checkpoints_dir = (std::filesystem::path(path) / "checkpoints").string();
  std::optional<std::string> latest = find_latest_checkpoint(checkpoints_dir, warnings);
  LATHE_CHECK(latest.has_value(), "no valid checkpoint in '", checkpoints_dir, "' (train first: lathe train)");
  return *latest;
}

}  // namespace lathe
