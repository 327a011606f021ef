#include "lathe/train/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "lathe/core/rng.h"
#include "lathe/io/tensor_bytes.h"
#include "scratch_directory.h"
#include "test_seed.h"

extern char** environ;

namespace lathe {
namespace {

namespace fs = std::filesystem;

// The tensors a tiny trainer would checkpoint: weights and AdamW moments, filled from a seed.
struct FakeTrainer {
  explicit FakeTrainer(uint64_t seed) {
    const std::pair<const char*, Shape> params[] = {{"model.embed_tokens.weight", Shape{32, 16}},
                                                    {"model.layers.0.input_layernorm.weight", Shape{16}},
                                                    {"model.layers.0.mlp.up_proj.weight", Shape{24, 16}}};
    uint64_t stream = 0;
    for (const auto& [name, shape] : params) {
      weights.emplace_back(name, Tensor::empty(shape, DType::f32));
      fill_normal(weights.back().second, seed, 0, 0.02, stream++);
      for (const char* moment : {".exp_avg", ".exp_avg_sq"}) {
        moments.emplace_back(std::string(name) + moment, Tensor::empty(shape, DType::f32));
        fill_uniform(moments.back().second, seed, 0, 1e-3, stream++);
      }
    }
  }

  CheckpointContents contents(int64_t step) const {
    CheckpointContents contents;
    contents.step = step;
    for (const auto& [name, tensor] : weights) contents.model.emplace_back(name, tensor.view());
    for (const auto& [name, tensor] : moments) contents.optimizer.emplace_back(name, tensor.view());
    contents.trainer_state.set("data_position", Json(int64_t{1000} * step));
    contents.trainer_state.set("rng_counter", Json(int64_t{7}));
    contents.trainer_state.set("note", "state at step " + std::to_string(step));
    contents.config_yaml = "model:\n  d_model: 16\ntrain:\n  steps: " + std::to_string(step) + "\n";
    return contents;
  }

  // A deep copy of the current values, to compare with later.
  NamedTensors copy_weights() const {
    NamedTensors copy;
    for (const auto& [name, tensor] : weights) copy.emplace_back(name, convert(tensor, DType::f32));
    return copy;
  }

  NamedTensors weights, moments;
};

std::vector<char> bytes_of(const TensorView& view) {
  std::vector<char> bytes(static_cast<size_t>(tensor_byte_size(view)));
  copy_to_contiguous(view, bytes.data());
  return bytes;
}

void expect_same_tensors(const NamedTensors& actual, const NamedTensorViews& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].first, expected[i].first);
    EXPECT_EQ(actual[i].second.shape(), expected[i].second.shape) << expected[i].first;
    EXPECT_EQ(actual[i].second.dtype(), expected[i].second.dtype) << expected[i].first;
    EXPECT_EQ(bytes_of(actual[i].second), bytes_of(expected[i].second)) << expected[i].first;
  }
}

void expect_same_contents(const LoadedCheckpoint& loaded, const CheckpointContents& expected) {
  EXPECT_EQ(loaded.step, expected.step);
  expect_same_tensors(loaded.model, expected.model);
  expect_same_tensors(loaded.optimizer, expected.optimizer);
  EXPECT_EQ(loaded.trainer_state.dump(0), expected.trainer_state.dump(0));
  EXPECT_EQ(loaded.config_yaml, expected.config_yaml);
}

CheckpointManagerOptions sync_options(int64_t keep_last = 0, std::ostream* log = &std::cerr) {
  CheckpointManagerOptions options;
  options.keep_last = keep_last;
  options.async = false;
  options.log = log;
  return options;
}

std::vector<std::string> entries_of(const std::string& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void flip_byte(const std::string& path, int64_t offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char byte = 0;
  file.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x10);
  file.seekp(offset);
  file.write(&byte, 1);
}

TEST(Checkpoint, RoundTripsTensorsStateAndConfigInTheDocumentedLayout) {
  FakeTrainer trainer(test_seed());
  ScratchDirectory scratch;
  std::string dir = scratch.file("checkpoints");
  CheckpointContents contents = trainer.contents(100);
  Tensor matrix = Tensor::empty(Shape{5, 3}, DType::f32);
  fill_uniform(matrix, test_seed(), -1, 1, 99);
  contents.model.emplace_back("lm_head.weight", matrix.view().transpose(0, 1));  // non-contiguous
  {
    CheckpointManager manager(dir, sync_options());
    manager.save(contents);
    CheckpointSaveStats stats = manager.last_stats();
    EXPECT_EQ(stats.step, 100);
    EXPECT_TRUE(stats.completed);
    int64_t on_disk = 0;
    for (const auto& entry : fs::directory_iterator(dir + "/step_00000100")) on_disk += entry.file_size();
    EXPECT_EQ(stats.bytes, on_disk);
  }
  EXPECT_EQ(entries_of(dir), std::vector<std::string>{"step_00000100"});
  EXPECT_EQ(entries_of(dir + "/step_00000100"),
            (std::vector<std::string>{"config.yaml", "manifest.json", "model.safetensors", "optimizer.safetensors",
                                      "trainer_state.json"}));
  Json manifest = Json::parse(read_file_contents(dir + "/step_00000100/manifest.json"));
  EXPECT_EQ(manifest.get("step").as_int(), 100);
  EXPECT_EQ(manifest.get("format_version").as_int(), 1);
  EXPECT_EQ(manifest.get("files").get("config.yaml").get("bytes").as_int(),
            static_cast<int64_t>(contents.config_yaml.size()));
  EXPECT_EQ(parse_crc32c(manifest.get("files").get("config.yaml").get("crc32c").as_string(), "crc"),
            crc32c(contents.config_yaml.data(), contents.config_yaml.size()));
  EXPECT_EQ(SafetensorsFile::open(dir + "/step_00000100/model.safetensors").metadata().at("format"), "pt");

  std::ostringstream warnings;
  std::optional<std::string> latest = find_latest_checkpoint(dir, warnings);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(*latest, dir + "/step_00000100");
  EXPECT_EQ(warnings.str(), "");
  LoadedCheckpoint loaded = load_checkpoint(*latest);
  expect_same_contents(loaded, contents);
  EXPECT_EQ(loaded.trainer_state.get("data_position").as_int(), 100000);
}

TEST(Checkpoint, FindLatestSkipsCorruptTruncatedAndIncompleteOnesWithOneWarningEach) {
  FakeTrainer trainer(test_seed());
  ScratchDirectory scratch;
  std::string dir = scratch.file("checkpoints");
  {
    CheckpointManager manager(dir, sync_options());
    for (int64_t step : {100, 200, 300, 400}) manager.save(trainer.contents(step));
  }
  int64_t model_size = static_cast<int64_t>(fs::file_size(dir + "/step_00000400/model.safetensors"));
  flip_byte(dir + "/step_00000400/model.safetensors", model_size - 5);  // a weight's byte
  fs::resize_file(dir + "/step_00000300/optimizer.safetensors", 100);
  fs::remove(dir + "/step_00000200/manifest.json");
  // Neither a temporary directory nor a stray file is a checkpoint.
  fs::create_directory(dir + "/step_00000500.tmp.1");
  std::ofstream(dir + "/step_00000600") << "not a directory";

  std::ostringstream warnings;
  EXPECT_EQ(find_latest_checkpoint(dir, warnings), dir + "/step_00000100");
  std::vector<std::string> lines = lines_of(warnings.str());
  ASSERT_EQ(lines.size(), 3u) << warnings.str();
  EXPECT_EQ(lines[0].rfind("warning: skipping checkpoint step_00000400: model.safetensors checksum mismatch", 0), 0u)
      << lines[0];
  EXPECT_EQ(lines[1].rfind("warning: skipping checkpoint step_00000300: optimizer.safetensors is 100 bytes", 0), 0u)
      << lines[1];
  EXPECT_EQ(lines[2], "warning: skipping checkpoint step_00000200: missing manifest.json (incomplete write?)");
  expect_same_contents(load_checkpoint(dir + "/step_00000100"), trainer.contents(100));

  try {
    load_checkpoint(dir + "/step_00000400");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("step_00000400"), std::string::npos) << message;
    EXPECT_NE(message.find("model.safetensors checksum mismatch"), std::string::npos) << message;
  }
  EXPECT_EQ(find_latest_checkpoint(scratch.file("does_not_exist")), std::nullopt);
}

TEST(Checkpoint, ManifestProblemsAreNamed) {
  FakeTrainer trainer(test_seed());
  ScratchDirectory scratch;
  std::string dir = scratch.file("checkpoints");
  CheckpointManager(dir, sync_options()).save(trainer.contents(7));
  std::string checkpoint = dir + "/step_00000007";
  std::string manifest_path = checkpoint + "/manifest.json";
  Json good = Json::parse(read_file_contents(manifest_path));
  auto expect_problem = [&](const Json& manifest, const char* expected) {
    write_file_synced(manifest_path, manifest.dump(2));
    try {
      verify_checkpoint(checkpoint);
      ADD_FAILURE() << "expected an error containing " << expected;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find(checkpoint), std::string::npos) << error.what();
    }
  };
  Json changed = good;
  changed.set("format_version", 2);
  expect_problem(changed, "format_version 2 is not supported");
  changed = good;
  changed.set("step", 8);
  expect_problem(changed, "step 8 does not match");
  changed = good;
  changed.set("step", 1e300);
  expect_problem(changed, "step must be a non-negative integer");
  Json files = good.get("files");
  files.set("../escape", files.get("config.yaml"));
  changed = good;
  changed.set("files", files);
  expect_problem(changed, "\"../escape\" is not a file name");
  files = good.get("files");
  files.set("extra.bin", files.get("config.yaml"));
  changed.set("files", files);
  expect_problem(changed, "extra.bin is missing");
  Json without_config = Json::object();
  for (const auto& [name, entry] : good.get("files").members())
    if (name != "config.yaml") without_config.set(name, entry);
  changed.set("files", without_config);
  expect_problem(changed, "does not list config.yaml");
  write_file_synced(manifest_path, "{\"format\": ");
  EXPECT_THROW(verify_checkpoint(checkpoint), Error);
  write_file_synced(manifest_path, good.dump(2));
  verify_checkpoint(checkpoint);
}

TEST(CheckpointManager, KeepLastDeletesTheOldestButNeverTheNewestOrTheOneJustWritten) {
  FakeTrainer trainer(test_seed());
  ScratchDirectory scratch;
  std::string dir = scratch.file("checkpoints");
  {
    CheckpointManager manager(dir, sync_options(2));
    for (int64_t step = 1; step <= 5; ++step) manager.save(trainer.contents(step));
  }
  EXPECT_EQ(entries_of(dir), (std::vector<std::string>{"step_00000004", "step_00000005"}));
  CheckpointManager(dir, sync_options(0)).save(trainer.contents(999));
  // keep_last 1 after saving an older step (e.g. resumed from an earlier checkpoint): both the
  // newest step and the one just written survive.
  CheckpointManager(dir, sync_options(1)).save(trainer.contents(6));
  EXPECT_EQ(entries_of(dir), (std::vector<std::string>{"step_00000006", "step_00000999"}));
  CheckpointManager(dir, sync_options(1)).save(trainer.contents(1000));
  EXPECT_EQ(entries_of(dir), (std::vector<std::string>{"step_00001000"}));
}

TEST(CheckpointManager, SavingTheSameStepAgainReplacesIt) {
  ScratchDirectory scratch;
  std::string dir = scratch.file("checkpoints");
  FakeTrainer first(test_seed()), second(test_seed() + 1);
  CheckpointManager manager(dir, sync_options(3));
  manager.save(first.contents(5));
  manager.save(second.contents(5));
  EXPECT_EQ(entries_of(dir), std::vector<std::string>{"step_00000005"});
  expect_same_contents(load_checkpoint(dir + "/step_00000005"), second.contents(5));
}

TEST(CheckpointManager, AsyncSaveHoldsTheValuesAtSaveTimeWhileTheCallerMovesOn) {
  FakeTrainer trainer(test_seed());
  ScratchDirectory scratch;
  std::string dir = scratch.file("checkpoints");
  CheckpointManagerOptions options;
  options.keep_last = 0;
  options.async = true;
  // Each file waits, so the write is surely in flight while the caller changes its weights below.
  options.test_hook_before_file = [](const std::string&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  };
  CheckpointManager manager(dir, options);
  NamedTensors at_save = trainer.copy_weights();
  manager.save(trainer.contents(10));
  // The trainer's next optimizer step overwrites its weights at once.
  for (auto& [name, tensor] : trainer.weights) fill_value(tensor, 7.0);
  manager.save(trainer.contents(20));  // waits for step 10's write first
  manager.wait();
  CheckpointSaveStats stats = manager.last_stats();
  EXPECT_EQ(stats.step, 20);
  EXPECT_TRUE(stats.completed);
  EXPECT_GT(stats.write_seconds, 0.0);
  EXPECT_GT(stats.bytes, 0);

  LoadedCheckpoint ten = load_checkpoint(dir + "/step_00000010");
  NamedTensorViews expected;
  for (const auto& [name, tensor] : at_save) expected.emplace_back(name, tensor.view());
  expect_same_tensors(ten.model, expected);
  LoadedCheckpoint twenty = load_checkpoint(dir + "/step_00000020");
  for (const auto& [name, tensor] : twenty.model) EXPECT_EQ(read_element(tensor, 0), 7.0) << name;
}

TEST(CheckpointManager, AsyncWriteErrorIsRethrownByWaitOnce) {
  FakeTrainer trainer(test_seed());
  ScratchDirectory scratch;
  std::string dir = scratch.file("checkpoints");
  CheckpointManagerOptions options;
  options.async = true;
  CheckpointManager manager(dir, options);
  // The directory disappears behind the manager's back and a file takes its place.
  fs::remove_all(dir);
  std::ofstream(dir) << "in the way";
  manager.save(trainer.contents(3));
  try {
    manager.wait();
    FAIL() << "expected the write error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(dir), std::string::npos) << error.what();
  }
  EXPECT_NO_THROW(manager.wait());
  fs::remove(dir);
  fs::create_directory(dir);
  manager.save(trainer.contents(4));
  manager.wait();
  EXPECT_EQ(find_latest_checkpoint(dir), dir + "/step_00000004");
}

TEST(CheckpointManager, RejectsBadOptionsAndDuplicateNames) {
  ScratchDirectory scratch;
  CheckpointManagerOptions negative;
  negative.keep_last = -1;
  EXPECT_THROW(CheckpointManager(scratch.file("a"), negative), Error);
  std::ofstream(scratch.file("file")) << "x";
  EXPECT_THROW(CheckpointManager(scratch.file("file"), sync_options()), Error);
  FakeTrainer trainer(test_seed());
  CheckpointContents contents = trainer.contents(1);
  contents.optimizer.push_back(contents.optimizer.front());
  CheckpointManager manager(scratch.file("b"), sync_options());
  EXPECT_THROW(manager.save(contents), Error);
  contents = trainer.contents(1);
  contents.model.front().first = "";
  EXPECT_THROW(manager.save(contents), Error);
  CheckpointSection section;
  section.keep_last = 5;
  section.async = false;
  CheckpointManagerOptions from_config = CheckpointManagerOptions::from_config(section);
  EXPECT_EQ(from_config.keep_last, 5);
  EXPECT_FALSE(from_config.async);
}

// Runs only inside the child process of the crash test below: starts saving step 200 slowly and
// waits to be killed.
TEST(CheckpointCrashHelper, SavesSlowlyUntilKilled) {
  const char* dir = std::getenv("LATHE_CHECKPOINT_CRASH_DIR");
  if (!dir) GTEST_SKIP() << "helper of CheckpointCrash (runs only in its child process)";
  CheckpointManagerOptions options = sync_options(3);
  // model.safetensors is written at once; the write then stalls before the next file.
  options.test_hook_before_file = [](const std::string& file) {
    if (file != "model.safetensors") std::this_thread::sleep_for(std::chrono::minutes(10));
  };
  CheckpointManager manager(dir, options);
  FakeTrainer trainer(1);
  CheckpointContents contents = trainer.contents(200);
  manager.save(contents);
}

TEST(CheckpointCrash, SigkillMidWriteLeavesThePreviousCheckpointAndAStaleDirectoryALaterManagerRemoves) {
  FakeTrainer trainer(test_seed());
  ScratchDirectory scratch;
  std::string dir = scratch.file("checkpoints");
  CheckpointManager(dir, sync_options(3)).save(trainer.contents(100));

  std::vector<std::string> environment;
  for (char** variable = environ; *variable; ++variable) {
    // Not GoogleTest's sharding (the sanitizer pass runs shards): the child runs its one test.
    const std::string_view text = *variable;
    if (!text.starts_with("GTEST_TOTAL_SHARDS=") && !text.starts_with("GTEST_SHARD_INDEX="))
      environment.emplace_back(text);
  }
  environment.push_back("LATHE_CHECKPOINT_CRASH_DIR=" + dir);
  std::vector<char*> envp;
  for (auto& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=CheckpointCrashHelper.SavesSlowlyUntilKilled";
  std::string log_path = scratch.file("child.log");
  char* argv[] = {const_cast<char*>("lathe_tests"), filter.data(), nullptr};

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // only async-signal-safe calls until exec
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execve("/proc/self/exe", argv, envp.data());
    ::_exit(127);
  }
  std::string temporary = dir + "/step_00000200.tmp." + std::to_string(child);
  bool reached = false;
  for (int poll = 0; poll < 60000 && !reached; ++poll) {  // up to a minute on a loaded machine
    if (fs::exists(temporary + "/model.safetensors")) reached = true;
    int status = 0;
    if (!reached && ::waitpid(child, &status, WNOHANG) == child) break;  // exited early: a bug
    if (!reached) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(reached) << "the child never got to write model.safetensors; its log:\n" << read_file_contents(log_path);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  // Mid-write: the temporary directory holds the model file but no manifest; no step 200.
  EXPECT_TRUE(fs::exists(temporary + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(temporary + "/manifest.json"));
  EXPECT_FALSE(fs::exists(dir + "/step_00000200"));
  std::ostringstream warnings;
  EXPECT_EQ(find_latest_checkpoint(dir, warnings), dir + "/step_00000100");
  EXPECT_EQ(warnings.str(), "");
  expect_same_contents(load_checkpoint(dir + "/step_00000100"), trainer.contents(100));

  std::ostringstream log;
  CheckpointManager later(dir, sync_options(3, &log));
  EXPECT_EQ(log.str(), "note: removed stale checkpoint directory " + temporary + " (writer process " +
                           std::to_string(child) + " is gone)\n");
  EXPECT_FALSE(fs::exists(temporary));
  later.save(trainer.contents(200));
  EXPECT_EQ(find_latest_checkpoint(dir), dir + "/step_00000200");
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

// Throughput of a ~100 MB checkpoint (a measurement, not a check; disabled by default):
//   ./build/lathe_tests --gtest_also_run_disabled_tests --gtest_filter='*CheckpointThroughput*'
TEST(CheckpointThroughput, DISABLED_Saves100MegabytesAndLoadsThem) {
  ScratchDirectory scratch;
  std::string dir = scratch.file("checkpoints");
  // 8.4M f32 parameters in 32 tensors + two AdamW moments each: 100 MB on disk.
  NamedTensors weights, moments;
  for (int layer = 0; layer < 32; ++layer) {
    std::string name = "model.layers." + std::to_string(layer) + ".mlp.up_proj.weight";
    weights.emplace_back(name, Tensor::empty(Shape{512, 512}, DType::f32));
    fill_normal(weights.back().second, 1, 0, 0.02, layer);
    for (const char* moment : {".exp_avg", ".exp_avg_sq"}) {
      moments.emplace_back(name + moment, Tensor::empty(Shape{512, 512}, DType::f32));
      fill_uniform(moments.back().second, 2, 0, 1e-3, layer);
    }
  }
  CheckpointContents contents;
  for (const auto& [name, tensor] : weights) contents.model.emplace_back(name, tensor.view());
  for (const auto& [name, tensor] : moments) contents.optimizer.emplace_back(name, tensor.view());
  contents.trainer_state.set("step", 1);
  contents.config_yaml = "x: 1\n";
  auto seconds = [](auto start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  {  // the floor for the snapshot: one memcpy of every tensor into warm buffers
    std::vector<char> warm(static_cast<size_t>(96) << 20, 1);
    for (int trial = 0; trial < 3; ++trial) {
      auto start = std::chrono::steady_clock::now();
      size_t offset = 0;
      for (const NamedTensors* list : {&weights, &moments})
        for (const auto& [name, tensor] : *list) {
          std::memcpy(warm.data() + offset, tensor.view().data, static_cast<size_t>(tensor_byte_size(tensor)));
          offset += static_cast<size_t>(tensor_byte_size(tensor));
        }
      std::printf("single-thread memcpy of the same %.1f MB into warm buffers: %.3f s\n", offset / 1e6, seconds(start));
    }
  }
  for (bool async : {false, true}) {
    CheckpointManagerOptions options;
    options.keep_last = 2;
    options.async = async;
    CheckpointManager manager(dir, options);
    for (int64_t step = 1; step <= 3; ++step) {
      contents.step = step + (async ? 10 : 0);
      auto start = std::chrono::steady_clock::now();
      manager.save(contents);
      double returned = seconds(start);
      manager.wait();
      CheckpointSaveStats stats = manager.last_stats();
      double megabytes = stats.bytes / 1e6;
      std::printf(
          "%s save %d: %.1f MB, save() returned after %.3f s (snapshot %.3f s = %.0f MB/s), write %.3f s "
          "(%.0f MB/s)\n",
          async ? "async" : "sync ", static_cast<int>(step), megabytes, returned, stats.snapshot_seconds,
          megabytes / stats.snapshot_seconds, stats.write_seconds, megabytes / stats.write_seconds);
    }
  }
  for (int trial = 0; trial < 3; ++trial) {
    auto start = std::chrono::steady_clock::now();
    std::optional<std::string> latest = find_latest_checkpoint(dir);
    double find_seconds = seconds(start);
    start = std::chrono::steady_clock::now();
    LoadedCheckpoint loaded = load_checkpoint(*latest);
    double load_seconds = seconds(start);
    std::printf("find_latest_checkpoint (verify 100 MB) %.3f s (%.0f MB/s), load_checkpoint %.3f s (%.0f MB/s)\n",
                find_seconds, 100.7 / find_seconds, load_seconds, 100.7 / load_seconds);
  }
}

}  // namespace
}  // namespace lathe
