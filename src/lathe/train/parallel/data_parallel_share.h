// Which rows of every global batch a rank trains (train/train_step.h has the batch semantics).
//
// The global batch of a step is train.batch_size * train.grad_accum sequences, whatever the world
// size. Rank r of N trains rows [r * G / N, (r + 1) * G / N) of it (G = global batch; N must
// divide G), in micro-batches of at most train.batch_size rows. One process (N = 1) trains all G
// rows as grad_accum micro-batches of train.batch_size.
#pragma once

#include <cstdint>

#include "lathe/core/error.h"
#include "lathe/train/train_config.h"

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

}  // namespace lathe
