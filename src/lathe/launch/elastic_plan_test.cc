#include "lathe/launch/elastic_plan.h"

#include <gtest/gtest.h>

#include <fstream>

#include "lathe/core/error.h"
#include "scratch_directory.h"

namespace lathe {
namespace {

TEST(ElasticPlan, GlobalBatchKeptAndEachRanksAccumulationAdapts) {
  // batch_size 2 x grad_accum 4 = 8 sequences per step: 1 worker accumulates 4 micro-batches of 2,
  // 2 workers 2 each, 4 workers 1 each, 8 workers 1 of a single row.
  for (const auto& [world, micro_batches] : {std::pair{1, 4}, {2, 2}, {4, 1}, {8, 1}}) {
    const auto plan = plan_batch(2, 4, world);
    ASSERT_TRUE(plan) << world;
    EXPECT_EQ(plan->batch_size * plan->grad_accum, 8);
    EXPECT_EQ(plan->micro_batches_per_rank, micro_batches) << world;
  }
  EXPECT_EQ(plan_batch(3, 2, 2)->micro_batches_per_rank, 1);  // 3 rows per rank fit one micro-batch
  EXPECT_EQ(plan_batch(2, 3, 2)->micro_batches_per_rank, 2);  // 3 rows per rank: 2 + 1
  EXPECT_FALSE(plan_batch(2, 3, 4));                          // 4 does not divide 6
}

TEST(ElasticPlan, WorldIsTheLargestUsableWithinLimits) {
  const ElasticLimits limits{2, 1, 3};
  EXPECT_EQ(plan_world(limits, 3, 6, 2)->world, 3);
  EXPECT_EQ(plan_world(limits, 5, 6, 2)->world, 3);  // never beyond max
  EXPECT_EQ(plan_world(limits, 1, 6, 2)->world, 1);
  EXPECT_FALSE(plan_world(limits, 0, 6, 2));
  EXPECT_EQ(plan_world(limits, 3, 2, 2)->world, 2);           // 3 cannot split 4: the next smaller world
  EXPECT_FALSE(plan_world(ElasticLimits{2, 2, 2}, 1, 2, 2));  // below min: wait
}

TEST(ElasticPlan, LimitsAreValidated) {
  EXPECT_NO_THROW(validate_elastic_limits({2, 1, 2}));
  EXPECT_THROW(validate_elastic_limits({2, 0, 2}), Error);
  EXPECT_THROW(validate_elastic_limits({2, 3, 2}), Error);
  EXPECT_THROW(validate_elastic_limits({3, 1, 2}), Error);
}

TEST(ElasticCapacity, FailedSlotCoolsDownAndCapacityFileCaps) {
  ScratchDirectory scratch;
  ElasticCapacity capacity(2, 10, "");
  EXPECT_EQ(capacity.available(0), 2);
  capacity.slot_failed(100);
  EXPECT_EQ(capacity.available(105), 1);
  EXPECT_NEAR(capacity.seconds_until_next_return(105), 5, 1e-12);
  EXPECT_EQ(capacity.available(110.5), 2);
  EXPECT_EQ(capacity.seconds_until_next_return(110.5), 0);

  const std::string file = scratch.file("capacity");
  ElasticCapacity from_file(2, 10, file);
  EXPECT_EQ(from_file.available(0), 2);  // no file yet: everything
  std::ofstream(file) << "1\n";
  EXPECT_EQ(from_file.available(0), 1);
  from_file.slot_failed(0);
  EXPECT_EQ(from_file.available(1), 0);
  std::ofstream(file) << "7\n";
  EXPECT_EQ(from_file.available(20), 2);  // capped at max_nproc
}

}  // namespace
}  // namespace lathe
