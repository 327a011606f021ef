// One optimizer step of data-parallel training (`mpirun -np N lathe train ...`).
//
// Batch semantics do not change with the world size: the global batch of a step is
// train.batch_size * train.grad_accum sequences, exactly the samples a single process takes, in
// the same order. Rank r trains on rows [r * G / N, (r + 1) * G / N) of it (G = global batch,
// N = world size; N must divide G), in micro-batches of at most train.batch_size rows, so
// train.batch_size is the per-process micro-batch (it bounds activation memory) and grad_accum
// only fixes the global batch. Each micro-batch's mean loss is weighted rows / G, the gradients
// are summed over ranks (train/gradient_reducer.h), so every rank ends with the gradient of the
// global batch's mean loss, as the single process computes it.
//
// Equality with one process: with 2 ranks and train.batch_size dividing G / 2, each rank's
// micro-batches are the single process's micro-batches, and the gradient sum g0 + g1 is one f32
// addition, as in the single process's accumulation - the result is bitwise identical to the
// single-process run when its kernels accumulate the same way (tested: data_parallel_test.cc and
// tests/integration/data_parallel_test.py). Otherwise (more ranks, other splits) the sums are
// ordered differently and the result agrees within float32 rounding.
//
// The loss, and the validation loss, are reduced over ranks; the caller writes logs on rank 0 only.
//
// The optimizer: with dist.shard_optimizer (default) a ShardedAdamW (ZeRO-1,
// train/sharded_optimizer.h), each rank holding 1/N of the moments; otherwise a whole
// AdamWOptimizer on every rank. Either way the weights stay identical on all ranks.
#pragma once

#include <memory>

#include "lathe/data/data_loader.h"
#include "lathe/dist/communicator.h"
#include "lathe/train/gradient_reducer.h"
#include "lathe/train/optimizer.h"
#include "lathe/train/sharded_optimizer.h"
#include "lathe/train/train_step.h"

namespace lathe {

// This rank's share of every global batch.
struct DataParallelShare {
  int64_t global_batch = 0;      // sequences per optimizer step, all ranks together
  int64_t rows = 0;              // this rank's sequences per step: global_batch / world
  int64_t first_row = 0;         // rank * rows
  int64_t micro_batch_rows = 0;  // min(rows, train.batch_size)
  int64_t micro_batches = 0;     // ceil(rows / micro_batch_rows)
};

// Throws lathe::Error when world_size does not divide the global batch.
DataParallelShare plan_data_parallel_share(const TrainSection& train, int rank, int world_size);

class DataParallelStep {
 public:
  // Collective (rank 0's process id is shared for checkpoint staging).
  DataParallelStep(TransformerModel& model, const TrainConfig& config, Communicator& communicator);

  // Takes the next global batch from `loader` (every rank's loader advances by the whole batch),
  // trains this rank's rows, all-reduces the gradients and applies the optimizer. The result's
  // loss is the global batch's mean loss, the same on every rank.
  StepResult run(int64_t step, DataLoader& loader, StepPhaseSeconds* phases = nullptr);

  // The mean loss over validation batches 0 .. batches-1, each rank evaluating every N-th batch.
  double validation_loss(const DataLoader& loader, int64_t batches);

  // Restores the optimizer from a checkpoint of any world size, sharded or not.
  void load_optimizer_state(const LoadedCheckpoint& checkpoint);
  // Collective: puts the optimizer state into `contents` (on rank 0): the whole state, or the
  // shards every rank writes into a staging directory under checkpoints_dir.
  void add_optimizer_state(CheckpointContents& contents, const std::string& checkpoints_dir, int64_t step);

  // "ZeRO-1: optimizer state 0.6 MB per rank (1/2 of 1.2 MB); per rank: weights 0.6 MB +
  // gradients 0.6 MB + moments 0.6 MB + all-gather buffer 0.6 MB"
  std::string describe_memory() const;

  // "gradient all-reduce: 12 buckets (23.4 MB) per step, 31.0 ms per step of which 4.1 ms exposed
  // after backward (87% overlapped)", over the steps run so far.
  std::string describe_communication() const;

  const DataParallelShare& share() const { return share_; }
  const GradientReductionStats& reduction_stats() const { return reducer_.last_stats(); }

 private:
  TransformerModel& model_;
  std::unique_ptr<AdamWOptimizer> whole_optimizer_;  // one of these two
  std::unique_ptr<ShardedAdamW> sharded_optimizer_;
  int64_t rank_0_process_id_ = 0;
  const TrainConfig& config_;
  Communicator& communicator_;
  DataParallelShare share_;
  GradientReducer reducer_;
  Tensor inputs_, targets_;
  int64_t steps_run_ = 0;
  GradientReductionStats
      reduction_totals_;  // summed over the steps run  // (rows, seq_len) i32: this rank's rows of the global batch
};

}  // namespace lathe
