#include "lathe/dist/elastic_plan.h"

#include <gtest/gtest.h>

#include <fstream>

#include "lathe/core/error.h"
#include "scratch_directory.h"

namespace lathe {
namespace {

TEST(ElasticPlan, GlobalBatchKeptByGradAccum) {
  // Global batch 8, 2 rows per rank: 2 workers run 4 x 2, one worker 2 x 4, four workers 8 x 1.
  auto two = plan_batch(8, 2, 2), one = plan_batch(8, 2, 1), four = plan_batch(8, 2, 4);
  ASSERT_TRUE(two && one && four);
  EXPECT_EQ(two->batch_size, 4);
  EXPECT_EQ(two->grad_accum, 2);
  EXPECT_EQ(one->batch_size, 2);
  EXPECT_EQ(one->grad_accum, 4);
  EXPECT_EQ(four->batch_size, 8);
  EXPECT_EQ(four->grad_accum, 1);
  for (const auto& plan : {*two, *one, *four}) EXPECT_EQ(plan.batch_size * plan.grad_accum, 8);
}

TEST(ElasticPlan, NearestDivisorWhenRowsTimesWorldDoesNotDivide) {
  auto plan = plan_batch(12, 2, 3);  // 6 divides 12: 6 x 2
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->batch_size, 6);
  plan = plan_batch(12, 4, 2);  // 8 does not divide 12: 6 (distance 2) beats 12 (distance 4)
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->batch_size, 6);
  EXPECT_EQ(plan->grad_accum, 2);
  EXPECT_FALSE(plan_batch(6, 2, 4));  // no multiple of 4 divides 6
}

TEST(ElasticPlan, WorldIsTheLargestUsableWithinLimits) {
  const ElasticLimits limits{2, 1, 3};
  EXPECT_EQ(plan_world(limits, 3, 12, 2)->world, 3);
  EXPECT_EQ(plan_world(limits, 5, 12, 2)->world, 3);  // never beyond max
  EXPECT_EQ(plan_world(limits, 1, 12, 2)->world, 1);
  EXPECT_FALSE(plan_world(limits, 0, 12, 2));
  EXPECT_EQ(plan_world(limits, 3, 4, 2)->world, 2);           // 3 cannot split 4: the next smaller world
  EXPECT_FALSE(plan_world(ElasticLimits{2, 2, 2}, 1, 4, 2));  // below min: wait
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
