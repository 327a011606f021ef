// time_interleaved_blocks runs paths in the documented order and block_ratios' median cancels a
// machine whose speed changes between rounds; timing_stats summarises samples.
#include "lathe/bench/timing.h"

#include <gtest/gtest.h>

#include <string>

namespace lathe {
namespace {

TEST(Timing, InterleavedBlocksRunInTurnAfterTheWarmUps) {
  std::string order;
  // Each path reports a fixed duration instead of measuring one.
  std::vector<TimedRun> paths = {[&] { order += 'a'; return 1.0; }, [&] { order += 'b'; return 2.0; }};
  const std::vector<InterleavedSamples> timed = time_interleaved_blocks(paths, /*warmup_runs=*/1, /*blocks=*/2,
                                                                        /*runs_per_block=*/3);
  EXPECT_EQ(order, "ab" "aaabbb" "aaabbb");
  ASSERT_EQ(timed.size(), 2u);
  EXPECT_EQ(timed[0].samples, std::vector<double>(6, 1.0));
  EXPECT_EQ(timed[1].block_medians, std::vector<double>(2, 2.0));
}

TEST(Timing, PairedRatioCancelsAMachineThatSlowsDownBetweenRounds) {
  // The machine runs at full speed for three rounds, then at a third of it for two: path b always
  // takes 1.5x path a in the same round. Medians over all runs would mix rounds; the paired ratio
  // compares each round with itself.
  int round_of_a = 0, round_of_b = 0;
  auto slowdown = [](int round) { return round < 3 ? 1.0 : 3.0; };
  std::vector<TimedRun> paths = {[&] { return 0.010 * slowdown(round_of_a++); },
                                 [&] { return 0.015 * slowdown(round_of_b++); }};
  const std::vector<InterleavedSamples> timed = time_interleaved_blocks(paths, 0, 5, 1);
  EXPECT_EQ(block_ratios(timed[1], timed[0]).size(), 5u);
  EXPECT_DOUBLE_EQ(median(block_ratios(timed[1], timed[0])), 1.5);
  EXPECT_DOUBLE_EQ(median(block_ratios(timed[0], timed[1])), 1.0 / 1.5);
}

TEST(Timing, StatsOfSamples) {
  const TimingStats stats = timing_stats({5, 1, 4, 2, 3});
  EXPECT_EQ(stats.runs, 5);
  EXPECT_DOUBLE_EQ(stats.min, 1);
  EXPECT_DOUBLE_EQ(stats.median, 3);
  EXPECT_DOUBLE_EQ(stats.p80, 5);  // the sample at index 5 * 4 / 5 of the sorted five
  EXPECT_DOUBLE_EQ(stats.mean, 3);
}

TEST(Timing, MedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  // Two rounds of a ratio (1.95x, 2.15x) have the median 2.05x, not the better round.
  EXPECT_DOUBLE_EQ(median({2.15, 1.95}), 2.05);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({7}), 7);
  EXPECT_DOUBLE_EQ(median({}), 0);
  EXPECT_DOUBLE_EQ(timing_stats({4, 1, 3, 2}).median, 2.5);
}

}  // namespace
}  // namespace lathe
