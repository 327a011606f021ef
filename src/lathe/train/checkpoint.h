// Crash-safe training checkpoints, optionally written in the background.
//
// Layout of one checkpoint (step 100):
//   <checkpoints_dir>/step_00000100/
//     model.safetensors       master weights under Hugging Face names (metadata format=pt)
//     optimizer.safetensors   optimizer state, e.g. "<param>.exp_avg", "<param>.exp_avg_sq"
//     trainer_state.json      opaque to this module (data position, RNG, schedule, metrics)
//     config.yaml             the resolved run config
//     manifest.json           written last: format version, step, and every file's size and
//                             CRC-32C: {"format": "lathe-checkpoint", "format_version": 1,
//                             "step": 100, "files": {"model.safetensors": {"bytes": N,
//                             "crc32c": "0x1234abcd"}, ...}}
//
// Write protocol: every file goes into step_00000100.tmp.<pid> and is fsynced, the manifest is
// written and fsynced, the directory is fsynced and renamed to its final name (atomically
// swapped with an existing checkpoint of the same step), and the parent directory is fsynced.
// A crash at any moment leaves either no new checkpoint or a complete one; other checkpoints are
// untouched. Files written by other processes (the optimizer shards of a data-parallel run, see
// train/parallel/sharded_optimizer.h) are handed over as staged files: already written and fsynced, they
// are renamed into the temporary directory and listed in the manifest like the others. Readers trust only final-named
// directories whose manifest, sizes and checksums verify.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/core/tensor.h"
#include "lathe/io/durable_file.h"
#include "lathe/io/safetensors.h"
#include "lathe/train/train_config.h"

namespace lathe {

// A finished, fsynced file on the checkpoint's filesystem that the checkpoint takes over (renamed
// into it as `name`); its digest goes into the manifest. Its directory is removed once empty.
struct StagedCheckpointFile {
  std::string path;
  std::string name;
  FileDigest digest;
};

// What one checkpoint holds, as views of the trainer's live tensors (any layout and dtype).
struct CheckpointContents {
  int64_t step = 0;
  NamedTensorViews model;      // f32 master weights, HF names ("model.layers.0.mlp.up_proj.weight")
  NamedTensorViews optimizer;  // "<param>.exp_avg", "<param>.exp_avg_sq", ...
  Json trainer_state;
  std::string config_yaml;
  std::vector<StagedCheckpointFile> staged_files;  // moved in when the checkpoint is written
  std::vector<Tensor> owned;  // storage of views made for this save (gathered expert tensors); save() copies them
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// A checkpoint read back: owned contiguous tensors in file order and dtype.
struct LoadedCheckpoint {
  std::string directory;
  int64_t step = 0;
  NamedTensors model;
  NamedTensors optimizer;
  Json trainer_state;
  std::string config_yaml;

  // Views of this checkpoint's tensors, e.g. to save it again.
  CheckpointContents contents() const;
};

// Where the time of one save went, for the trainer's log.
struct CheckpointSaveStats {
  int64_t step = -1;            // -1: nothing saved yet
  int64_t bytes = 0;            // all files of the checkpoint
  double wait_seconds = 0;      // save() blocked on the previous write
  double snapshot_seconds = 0;  // copying the tensors (synchronous: the trainer waits for this)
  double write_seconds = 0;     // files, fsyncs, rename, pruning (background when async)
  bool completed = false;       // write_seconds and bytes are final
};

struct CheckpointManagerOptions {
  int64_t keep_last = 3;  // complete checkpoints kept after each save (>= 0; 0 keeps all)
  bool async = true;      // write in a background thread
  // Test hook, called (on the writing thread) before each file of a checkpoint is written, with
  // the file's name: a test sleeps there to kill the process while a checkpoint is half written,
  // or to change tensors while a write is surely in flight.
  std::function<void(const std::string& file_name)> test_hook_before_file;
  std::ostream* log = &std::cerr;  // one-line notes (stale directories removed, late errors)

  static CheckpointManagerOptions from_config(const CheckpointSection& section);
};

class CheckpointManager {
 public:
  // Creates checkpoints_dir if needed and removes stale "step_*.tmp.<pid>" directories whose
  // writer process is gone (one note each). Throws lathe::Error for an unusable directory or a
  // negative keep_last.
  explicit CheckpointManager(std::string checkpoints_dir, CheckpointManagerOptions options = {});
  // Waits for a write in flight; an error it raised is printed to the log (cannot throw here).
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Waits for the previous write (rethrowing its error), copies the contents into snapshot
  // buffers owned by the manager (the caller may change its tensors as soon as this returns),
  // then writes: in the background when async, else before returning. After a successful write,
  // deletes the oldest complete checkpoints beyond keep_last (never the one just written, never
  // the newest). Throws lathe::Error (duplicate tensor name, I/O failure naming the file).
  void save(const CheckpointContents& contents);
  // Blocks until no write is in flight; rethrows the write's error as lathe::Error (once).
  void wait();

  // The last save's timings (completed once its write finished).
  CheckpointSaveStats last_stats() const;
  const std::string& directory() const { return directory_; }

 private:
  struct Snapshot;
  void take_snapshot(const CheckpointContents& contents);
  void write_snapshot();

  std::string directory_;
  CheckpointManagerOptions options_;
  std::unique_ptr<Snapshot> snapshot_;  // reused between saves when shapes match
  std::thread writer_;
  std::exception_ptr write_error_;
  mutable std::mutex stats_mutex_;
  CheckpointSaveStats stats_;
};

// "step_00000100" (at least 8 digits).
std::string checkpoint_directory_name(int64_t step);

// The newest checkpoint under checkpoints_dir that verifies, or nullopt when there is none (or
// the directory does not exist). Each newer checkpoint that fails verification is skipped with
// one line on `warnings`: "warning: skipping checkpoint step_00000200: model.safetensors
// checksum mismatch (manifest 0x..., file 0x...)".
std::optional<std::string> find_latest_checkpoint(const std::string& checkpoints_dir,
                                                  std::ostream& warnings = std::cerr);

// `path` itself when it is a checkpoint directory (has a manifest.json), else the newest valid
// checkpoint of the run directory `path`; throws lathe::Error when `path` does not exist or holds
// no valid checkpoint (the damaged ones are reported on `warnings`).
std::string resolve_checkpoint_directory(const std::string& path, std::ostream& warnings = std::cerr);

// Checks manifest, file sizes and checksums of one checkpoint directory; throws lathe::Error
// "checkpoint <dir>: <reason>" when anything is missing or differs.
void verify_checkpoint(const std::string& checkpoint_dir);

// Verifies and reads a checkpoint; throws lathe::Error naming the directory and the file (and
// tensor) at fault.
LoadedCheckpoint load_checkpoint(const std::string& checkpoint_dir);

}  // namespace lathe
