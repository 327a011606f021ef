#include "lathe/train/parallel/data_parallel_share.h"

#include <algorithm>

#include "lathe/core/error.h"

namespace lathe {

DataParallelShare plan_data_parallel_share(const TrainSection& train, int rank, int world_size) {
  LATHE_ASSERT(world_size >= 1 && rank >= 0 && rank < world_size);
  DataParallelShare share;
  share.global_batch = train.batch_size * train.grad_accum;
  LATHE_CHECK(share.global_batch % world_size == 0, "world size ", world_size,
              " does not divide the global batch train.batch_size * train.grad_accum = ", train.batch_size, " * ",
              train.grad_accum, " = ", share.global_batch, " sequences (choose a world size that divides it)");
  share.rows = share.global_batch / world_size;
  share.first_row = rank * share.rows;
  share.micro_batch_rows = std::min(share.rows, train.batch_size);
  share.micro_batches = (share.rows + share.micro_batch_rows - 1) / share.micro_batch_rows;
  return share;
}

}  // namespace lathe
