#include "lathe/train/memory_check.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "lathe/core/error.h"
#include "lathe/device/cuda_runtime.h"
#include "lathe/models/memory_estimate.h"
#include "lathe/train/model_bounds.h"
#include "lathe/train/parallel/data_parallel_share.h"

namespace lathe {

namespace {

// A number from a one-line file; -1 when missing or "max" (no limit).
int64_t read_number_file(const std::string& path) {
  std::ifstream file(path);
  std::string text;
  if (!(file >> text) || text == "max") return -1;
  try {
    size_t used = 0;
    const long long value = std::stoll(text, &used);
    return used == text.size() && value >= 0 ? value : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

// "MemAvailable:   123456 kB" from meminfo, in bytes; -1 when absent.
int64_t read_meminfo_field(const std::string& path, const std::string& field) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(field.size() + 1));
    long long kilobytes = -1;
    return fields >> kilobytes && kilobytes >= 0 ? kilobytes * 1024 : -1;
  }
  return -1;
}

void consider(AvailableMemory& least, int64_t bytes, const std::string& source) {
  if (bytes < 0) return;
  if (least.bytes < 0 || bytes < least.bytes) least = {bytes, source};
}

// Limit minus usage of the cgroup directory `directory` and each parent up to `root`.
void consider_cgroup_chain(AvailableMemory& least, const std::string& root, std::string path,
                           const std::string& limit_file, const std::string& usage_file, const std::string& kind) {
  for (;;) {
    const std::string directory = root + path;
    const int64_t limit = read_number_file(directory + "/" + limit_file);
    // cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages): treat > 2^60 as none.
    if (limit >= 0 && limit < (int64_t{1} << 60)) {
      const int64_t usage = std::max<int64_t>(0, read_number_file(directory + "/" + usage_file));
      consider(least, std::max<int64_t>(0, limit - usage),
               str_cat(kind, " ", limit_file, " of ", path.empty() ? "/" : path, " (", limit, " bytes, ", usage,
                       " in use)"));
    }
    if (path.empty() || path == "/") return;
    const size_t slash = path.rfind('/');
    path = slash == std::string::npos || slash == 0 ? "" : path.substr(0, slash);
  }
}

std::string gigabytes(int64_t bytes) {
  char text[32];
  const double value = static_cast<double>(bytes) / 1e9;
  std::snprintf(text, sizeof text, value >= 10 ? "%.0f GB" : "%.2f GB", value);
  return text;
}

}  // namespace

AvailableMemory available_memory(const MemoryProbeRoots& roots) {
  AvailableMemory least;
  consider(least, read_meminfo_field(roots.proc + "/meminfo", "MemAvailable"), "MemAvailable");
  // /proc/self/cgroup: "0::/path" (v2) and "N:memory:/path" or "N:...,memory,...:/path" (v1).
  std::ifstream cgroups(roots.proc + "/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    bool memory_controller = false;
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) memory_controller = memory_controller || name == "memory";
    std::string path = line.substr(second + 1);
    if (path == "/") path.clear();
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      // v2 unified hierarchy: at the root of the mount, or under "unified" in hybrid set-ups.
      for (const std::string& mount : {roots.cgroup, roots.cgroup + "/unified"})
        consider_cgroup_chain(least, mount, path, "memory.max", "memory.current", "cgroup v2");
    } else if (memory_controller) {
      consider_cgroup_chain(least, roots.cgroup + "/memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes",
                            "cgroup v1");
      // Inside a container the namespaced hierarchy starts at the mount itself.
      if (!path.empty())
        consider_cgroup_chain(least, roots.cgroup + "/memory", "", "memory.limit_in_bytes", "memory.usage_in_bytes",
                              "cgroup v1");
    }
  }
  if (roots.address_space_limit) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      const int64_t in_use = read_meminfo_field(roots.proc + "/self/status", "VmSize");
      consider(least, std::max<int64_t>(0, static_cast<int64_t>(limit.rlim_cur) - std::max<int64_t>(0, in_use)),
               "the address-space limit (ulimit -v)");
    }
  }
  return least;
}

namespace {

TrainingMemoryEstimate estimate_per_rank(const TrainConfig& config, int64_t rows, int world, RematPolicy policy) {
  TrainingMemoryEstimate estimate = estimate_training_memory(config.model, rows, config.train.seq_len, policy);
  if (world > 1 && config.dist.shard_optimizer && !config.dist.expert_parallel)
    estimate.optimizer_bytes = (estimate.optimizer_bytes + world - 1) / world;
  return estimate;
}

}  // namespace

MemoryPrediction predict_training_memory(const TrainConfig& config, int world, int local_ranks) {
  MemoryPrediction prediction;
  prediction.world = std::max(1, world);
  prediction.local_ranks = std::max(1, local_ranks);
  prediction.micro_batch_rows = plan_data_parallel_share(config.train, 0, prediction.world).micro_batch_rows;
  prediction.per_rank_bytes =
      estimate_per_rank(config, prediction.micro_batch_rows, prediction.world, config.train.remat).total_bytes();
  return prediction;
}

std::string memory_refusal(const TrainConfig& config, const MemoryPrediction& prediction,
                           const AvailableMemory& available) {
  if (!config.train.check_memory || available.bytes < 0 || prediction.total_bytes() <= available.bytes) return "";
  const TrainSection& train = config.train;
  const int64_t ranks = prediction.local_ranks;
  std::string knobs =
      str_cat("a smaller train.batch_size (now ", train.batch_size,
              "; raise train.grad_accum to keep the global batch), a shorter train.seq_len (now ", train.seq_len, ")");
  if (train.remat != RematPolicy::recompute_layer) {
    const int64_t recompute =
        estimate_per_rank(config, prediction.micro_batch_rows, prediction.world, RematPolicy::recompute_layer)
            .total_bytes();
    knobs += str_cat(", train.remat=recompute_layer (now ", to_string(train.remat), "; would need ",
                     gigabytes(recompute * ranks), ")");
  }
  const TrainingMemoryEstimate one_row = estimate_per_rank(config, 1, prediction.world, train.remat);
  knobs +=
      str_cat(" or a smaller model (the weights, gradients and optimizer state alone need ",
              gigabytes((one_row.parameter_bytes + one_row.gradient_bytes + one_row.optimizer_bytes) * ranks), ")");
  return str_cat("the run needs about ", gigabytes(prediction.total_bytes()), " (", prediction.total_bytes(),
                 " bytes predicted", ranks > 1 ? str_cat(" for ", ranks, " ranks on this machine") : "", ") but ",
                 gigabytes(available.bytes), " (", available.bytes, " bytes) are available (", available.source,
                 "); make it fit with ", knobs, "; train.check_memory=false skips this check");
}

void check_training_memory(const TrainConfig& config, int world, int local_ranks) {
  if (!config.train.check_memory) return;
  AvailableMemory available = available_memory();
  if (config.train.device == "cuda" && cuda::available()) {  // the step's tensors live on the GPU
    const cuda::DeviceProperties& gpu = cuda::devices().front();
    available = {gpu.total_memory, str_cat("the memory of GPU ", gpu.index, " (", gpu.name, ")")};
  }
  const std::string refusal =
      memory_refusal(config, predict_training_memory(config, world, local_ranks), available);
  LATHE_CHECK(refusal.empty(), refusal);
}

void check_weights_fit_in_memory(const ModelConfig& model, const std::string& what) {
  const std::vector<std::string> beyond = model_dimension_problems(model);  // before counting per layer
  LATHE_CHECK(beyond.empty(), what, ": ", beyond.empty() ? "" : beyond.front());
  const AvailableMemory available = available_memory();
  const int64_t parameters = model.parameter_count();
  const int64_t bytes = parameters > INT64_MAX / 4 ? INT64_MAX : parameters * 4;
  LATHE_CHECK(available.bytes < 0 || bytes <= available.bytes, what, " has ", parameters, " parameters (",
              gigabytes(bytes), " in f32) but ", gigabytes(available.bytes), " are available (", available.source, ")");
}

}  // namespace lathe
