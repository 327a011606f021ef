// How a rank's share of the global batch is planned (train/parallel/data_parallel_share.h). The end-to-end
// equality with one process is tests/integration/data_parallel_test.py (needs mpirun).
#include "lathe/train/parallel/data_parallel_share.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TrainSection batch(int64_t batch_size, int64_t grad_accum) {
  TrainSection train;
  train.batch_size = batch_size;
  train.grad_accum = grad_accum;
  return train;
}

TEST(DataParallelShare, RanksSplitTheGlobalBatchIntoContiguousRows) {
  // 4 x 2 = 8 sequences over 2 ranks: each takes one single-process micro-batch.
  for (int rank = 0; rank < 2; ++rank) {
    const DataParallelShare share = plan_data_parallel_share(batch(4, 2), rank, 2);
    EXPECT_EQ(share.global_batch, 8);
    EXPECT_EQ(share.rows, 4);
    EXPECT_EQ(share.first_row, 4 * rank);
    EXPECT_EQ(share.micro_batch_rows, 4);
    EXPECT_EQ(share.micro_batches, 1);
  }
  // batch_size bounds a rank's micro-batch: 12 sequences on 2 ranks, 6 rows each in 2 + 2 + 2.
  const DataParallelShare accumulated = plan_data_parallel_share(batch(2, 6), 1, 2);
  EXPECT_EQ(accumulated.rows, 6);
  EXPECT_EQ(accumulated.first_row, 6);
  EXPECT_EQ(accumulated.micro_batch_rows, 2);
  EXPECT_EQ(accumulated.micro_batches, 3);
  // An uneven last micro-batch: 5 rows in micro-batches of at most 2.
  const DataParallelShare uneven = plan_data_parallel_share(batch(2, 5), 0, 2);
  EXPECT_EQ(uneven.rows, 5);
  EXPECT_EQ(uneven.micro_batches, 3);
  // World 1 is the single process.
  const DataParallelShare single = plan_data_parallel_share(batch(3, 4), 0, 1);
  EXPECT_EQ(single.rows, 12);
  EXPECT_EQ(single.micro_batch_rows, 3);
  EXPECT_EQ(single.micro_batches, 4);
}

TEST(DataParallelShare, WorldSizeMustDivideTheGlobalBatch) {
  try {
    plan_data_parallel_share(batch(2, 2), 0, 3);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "world size 3 does not divide the global batch train.batch_size * train.grad_accum = 2 * 2 = 4 "
                 "sequences (choose a world size that divides it)");
  }
}

}  // namespace
}  // namespace lathe
