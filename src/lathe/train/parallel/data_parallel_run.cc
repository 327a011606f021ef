#include "lathe/train/parallel/data_parallel_run.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "lathe/core/parallel.h"

namespace lathe {

std::FILE* discarded_output() {
  static std::FILE* sink = std::fopen("/dev/null", "w");
  return sink;
}

std::ostream& discarded_stream() {
  static std::ostream sink(nullptr);  // no buffer: every write fails silently
  return sink;
}

int threads_per_rank(const Communicator& communicator) {
  const int cores = available_cpus();  // the affinity mask, not the machine
  return std::max(1, cores / std::max(1, communicator.local_world_size()));
}

void run_on_rank_0_first(Communicator& communicator, const std::function<void()>& work) {
  if (communicator.world_size() == 1) return work();
  int32_t rank_0_succeeded = 0;
  if (communicator.rank() == 0) {
    try {
      work();
    } catch (...) {
      communicator.broadcast(&rank_0_succeeded, sizeof rank_0_succeeded, 0);
      throw;
    }
    rank_0_succeeded = 1;
    communicator.broadcast(&rank_0_succeeded, sizeof rank_0_succeeded, 0);
    return;
  }
  communicator.broadcast(&rank_0_succeeded, sizeof rank_0_succeeded, 0);
  LATHE_CHECK(rank_0_succeeded == 1, "rank ", communicator.rank(), ": rank 0 failed (see its error)");
  work();
}

bool any_rank_true(Communicator& communicator, bool value) {
  double count = value ? 1.0 : 0.0;
  communicator.all_reduce_sum(&count, 1);
  return count > 0;
}

MachinePeaks measure_machine_peaks_once(Communicator& communicator) {
  if (communicator.world_size() == 1) return measure_machine_peaks(/*quick=*/true);
  double values[5] = {0, 0, 0, 0, 0};
  if (communicator.rank() == 0) {
    const MachinePeaks peaks = measure_machine_peaks(/*quick=*/true);
    values[0] = peaks.f32_gflops;
    values[1] = peaks.bf16_gflops;
    values[2] = peaks.copy_gbytes;
    values[3] = peaks.amx_gflops;
    values[4] = peaks.bf16_dot_speedup;
  }
  communicator.broadcast(values, sizeof values, 0);
  MachinePeaks peaks;
  peaks.f32_gflops = values[0] * communicator.world_size();
  peaks.bf16_gflops = values[1] * communicator.world_size();
  peaks.copy_gbytes = values[2];
  peaks.amx_gflops = values[3] * communicator.world_size();
  peaks.bf16_dot_speedup = values[4];  // every rank decides train.dtype=auto on rank 0's figure
  peaks.threads = num_threads() * communicator.world_size();
  return peaks;
}

std::string describe_data_parallel_run(const DataParallelShare& share, const Communicator& communicator,
                                       const TrainConfig& config) {
  return str_cat("data parallel: ", communicator.world_size(), " ranks over ", communicator.name(), ", ", num_threads(),
                 " thread(s) each; each rank trains ", share.rows, " of the ", share.global_batch,
                 " sequences of a step (", share.micro_batches, " micro-batch(es) of up to ", share.micro_batch_rows,
                 "); gradient buckets of ", config.dist.bucket_mb, " MB",
                 config.train.device == "cuda" ? str_cat(" on the GPU (", communicator.device_transport(), ")") : "",
                 config.dist.overlap && !config.dist.expert_parallel ? ", overlapped with backward"
                                                                     : ", reduced after backward",
                 config.dist.expert_parallel ? str_cat("; expert parallel: each rank holds ",
                                                       config.model.moe_experts / communicator.world_size(), " of the ",
                                                       config.model.moe_experts,
                                                       " experts of every MoE layer (all-to-all token exchange)")
                                             : "");
}

void end_data_parallel_run_with_error(Communicator& communicator, const std::string& message) {
  if (communicator.rank() == 0) {
    std::fprintf(stderr, "lathe train: error: %s\n", message.c_str());
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::fprintf(stderr, "lathe train: error: rank %d: %s\n", communicator.rank(), message.c_str());
  }
  std::fflush(stderr);
  communicator.abort(2);
  std::abort();  // not reached: abort() ends the process
}

}  // namespace lathe
