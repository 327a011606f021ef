// The memory check (train/memory_check.h): available memory read from made-up /proc and cgroup
// trees (v2, v1, MemAvailable, the least wins), and the refusal's content.
#include "lathe/train/memory_check.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lathe/models/memory_estimate.h"
#include "scratch_directory.h"

namespace lathe {
namespace {

void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

struct FakeMachine {
  ScratchDirectory scratch;
  MemoryProbeRoots roots;
  FakeMachine(int64_t mem_available_kb, const std::string& cgroup_lines) {
    roots.proc = scratch.file("proc");
    roots.cgroup = scratch.file("cgroup");
    roots.address_space_limit = false;
    write_file(roots.proc + "/meminfo", "MemTotal:       65536000 kB\nMemAvailable:   " +
                                            std::to_string(mem_available_kb) + " kB\nBuffers: 1 kB\n");
    write_file(roots.proc + "/self/cgroup", cgroup_lines);
  }
};

TEST(AvailableMemory, MemAvailableWithoutCgroupLimits) {
  FakeMachine machine(1000, "0::/user.slice/session\n");
  write_file(machine.roots.cgroup + "/user.slice/session/memory.max", "max\n");
  const AvailableMemory available = available_memory(machine.roots);
  EXPECT_EQ(available.bytes, 1000 * 1024);
  EXPECT_EQ(available.source, "MemAvailable");
}

TEST(AvailableMemory, CgroupV2LimitOfAParentCounts) {
  FakeMachine machine(64000000, "0::/job.slice/run\n");
  write_file(machine.roots.cgroup + "/job.slice/run/memory.max", "max\n");
  write_file(machine.roots.cgroup + "/job.slice/run/memory.current", "100\n");
  write_file(machine.roots.cgroup + "/job.slice/memory.max", "8000000000\n");
  write_file(machine.roots.cgroup + "/job.slice/memory.current", "3000000000\n");
  const AvailableMemory available = available_memory(machine.roots);
  EXPECT_EQ(available.bytes, 5000000000);  // limit minus usage of the parent
  EXPECT_NE(available.source.find("cgroup v2 memory.max of /job.slice"), std::string::npos) << available.source;
}

TEST(AvailableMemory, CgroupV1LimitAndItsNoLimitValue) {
  FakeMachine machine(64000000, "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n");
  write_file(machine.roots.cgroup + "/memory/docker/abc/memory.limit_in_bytes", "2000000000\n");
  write_file(machine.roots.cgroup + "/memory/docker/abc/memory.usage_in_bytes", "500000000\n");
  write_file(machine.roots.cgroup + "/memory/docker/memory.limit_in_bytes", "9223372036854771712\n");  // none
  const AvailableMemory available = available_memory(machine.roots);
  EXPECT_EQ(available.bytes, 1500000000);
  EXPECT_NE(available.source.find("cgroup v1"), std::string::npos) << available.source;
}

TEST(AvailableMemory, ContainerSeesItsCgroupAtTheMountRoot) {
  FakeMachine machine(64000000, "4:memory:/process_api/abc\n");  // the path does not exist inside
  write_file(machine.roots.cgroup + "/memory/memory.limit_in_bytes", "4000000000\n");
  write_file(machine.roots.cgroup + "/memory/memory.usage_in_bytes", "1000000000\n");
  EXPECT_EQ(available_memory(machine.roots).bytes, 3000000000);
}

TEST(AvailableMemory, NothingReadableMeansUnknown) {
  MemoryProbeRoots roots;
  roots.proc = "/nonexistent/proc";
  roots.cgroup = "/nonexistent/cgroup";
  roots.address_space_limit = false;
  EXPECT_EQ(available_memory(roots).bytes, -1);
}

TrainConfig small_config() {
  TrainConfig config;
  config.model.vocab_size = 300;
  config.model.d_model = 64;
  config.model.n_layers = 2;
  config.model.n_heads = 2;
  config.model.n_kv_heads = 2;
  config.model.ffn_dim = 128;
  config.model.max_seq_len = 64;
  config.train.batch_size = 4;
  config.train.seq_len = 32;
  return config;
}

TEST(MemoryCheck, PredictionIsTheEstimateTimesTheLocalRanks) {
  TrainConfig config = small_config();
  const int64_t single = estimate_training_memory(config.model, 4, 32, config.train.remat).total_bytes();
  EXPECT_EQ(predict_training_memory(config, 1, 1).total_bytes(), single);
  // Two ranks, replicated moments: each rank trains 2 of the 4 rows per micro-batch.
  config.dist.shard_optimizer = false;
  const MemoryPrediction two = predict_training_memory(config, 2, 2);
  EXPECT_EQ(two.per_rank_bytes, estimate_training_memory(config.model, 2, 32, config.train.remat).total_bytes());
  EXPECT_EQ(two.total_bytes(), 2 * two.per_rank_bytes);
}

TEST(MemoryCheck, RefusalNamesBothByteCountsAndTheKnobs) {
  TrainConfig config = small_config();
  const MemoryPrediction prediction = predict_training_memory(config, 1, 1);
  const AvailableMemory plenty{prediction.total_bytes(), "MemAvailable"};
  EXPECT_EQ(memory_refusal(config, prediction, plenty), "");  // exactly fits
  const AvailableMemory scarce{prediction.total_bytes() - 1, "cgroup v2 memory.max of /x"};
  const std::string refusal = memory_refusal(config, prediction, scarce);
  for (const std::string& part : {std::to_string(prediction.total_bytes()) + " bytes predicted",
                                  std::to_string(scarce.bytes) + " bytes", std::string("cgroup v2 memory.max of /x"),
                                  std::string("train.batch_size (now 4"), std::string("train.seq_len (now 32)"),
                                  std::string("train.remat=recompute_layer"), std::string("train.check_memory=false")})
    EXPECT_NE(refusal.find(part), std::string::npos) << part << " not in: " << refusal;
  EXPECT_EQ(refusal.find('\n'), std::string::npos);
  config.train.check_memory = false;
  EXPECT_EQ(memory_refusal(config, prediction, scarce), "");
  EXPECT_EQ(memory_refusal(small_config(), prediction, AvailableMemory{}), "");  // unknown: not refused
}

}  // namespace
}  // namespace lathe
