// Knowing before any work whether a run fits in memory (`lathe train`, `lathe config --check`).
//
// Available memory is the least of: MemAvailable (/proc/meminfo); the cgroup's limit minus its
// usage, for this process's cgroup and every parent up to the root (cgroup v2: memory.max and
// memory.current; v1: memory.limit_in_bytes and memory.usage_in_bytes), so a container's or a
// systemd slice's limit counts; and RLIMIT_AS minus the address space in use.
//
// Predicted memory is the tensor memory of one training step (models/memory_estimate.h, within ~1%
// of the measured peak) at each rank's micro-batch, with ZeRO-1's 1/N of the moments, times the
// ranks on this machine (they share its memory). A run that does not fit is refused before data
// preparation and model building, naming both byte counts and the knobs that would make it fit
// (batch, sequence length, remat policy); train.check_memory=false lets an expert skip the check.
// train.device=cuda checks against the GPU's memory instead (its total: the step's tensors live
// there; the host keeps only the checkpoint snapshot).
#pragma once

#include <cstdint>
#include <string>

#include "lathe/train/train_config.h"

namespace lathe {

struct AvailableMemory {
  int64_t bytes = -1;  // -1: nothing could be read (the check then passes)
  std::string source;  // which limit is the least: "MemAvailable", "cgroup v2 memory.max of /a/b", ...
};

// Where the probes read (tests point them at a made-up tree).
struct MemoryProbeRoots {
  std::string proc = "/proc";
  std::string cgroup = "/sys/fs/cgroup";
  bool address_space_limit = true;  // RLIMIT_AS of this process
};

AvailableMemory available_memory(const MemoryProbeRoots& roots = {});

struct MemoryPrediction {
  int64_t per_rank_bytes = 0;
  int64_t micro_batch_rows = 1;  // each rank's micro-batch
  int world = 1;
  int local_ranks = 1;
  int64_t total_bytes() const { return per_rank_bytes * local_ranks; }
};

// The prediction for `world` ranks of which `local_ranks` share this machine.
MemoryPrediction predict_training_memory(const TrainConfig& config, int world, int local_ranks);

// Empty when the run fits (or train.check_memory is false, or nothing could be read); else the
// one-line refusal: predicted and available bytes, and the knobs.
std::string memory_refusal(const TrainConfig& config, const MemoryPrediction& prediction,
                           const AvailableMemory& available);

// Throws lathe::Error with memory_refusal's line when the run does not fit here.
void check_training_memory(const TrainConfig& config, int world, int local_ranks);

// For commands that only hold the weights (`lathe convert`, `lathe generate`): throws lathe::Error
// naming `what`, its parameter count and both byte counts when its f32 weights alone exceed the
// available memory (a config.json with an absurd layer count would otherwise allocate until the
// kernel kills the process).
void check_weights_fit_in_memory(const ModelConfig& model, const std::string& what);

}  // namespace lathe
