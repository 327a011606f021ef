// Dispatch order (call > pinned > tuned > heuristic), ISA forcing, and the tuning cache's
// handling of foreign, stale and corrupted entries. Uses rms_norm as the subject op.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/ops/emulated_impl.h"
#include "lathe/ops/problem.h"
#include "lathe/ops/rms_norm/rms_norm.h"
#include "lathe/tune/autotuner.h"
#include "lathe/tune/tuning_cache.h"

namespace lathe {
namespace {

const char* kShape = "rows=40,dim=100";

class DispatchTest : public ::testing::Test {
 protected:
  void SetUp() override { dispatch_table().clear(); }
  void TearDown() override {
    dispatch_table().clear();
    set_isa_limit(Isa::avx512_bf16);
  }
  std::unique_ptr<OpProblem> problem() { return find_op("rms_norm").make_problem(ShapeSpec::parse(kShape), 3); }
  std::string best_impl() { return problem()->impl_names().front(); }
  // The implementations dispatch and tuning choose among (emulations, registered after scalar in
  // builds with the CUDA toolkit, are for the contract tests).
  std::vector<std::string> dispatchable_impls() {
    std::vector<std::string> names;
    for (const std::string& name : problem()->impl_names())
      if (!is_emulated_impl(name)) names.push_back(name);
    return names;
  }
};

TEST_F(DispatchTest, PinnedBeatsTunedBeatsHeuristic) {
  std::string impl = best_impl();
  std::string key = problem()->shape_key();
  EXPECT_NE(problem()->describe_dispatch().find("(heuristic)"), std::string::npos);
  dispatch_table().set_tuned("rms_norm", impl, key, ConfigParams::parse("rows_per_task=4"));
  EXPECT_EQ(problem()->describe_dispatch(), impl + " (tuned) rows_per_task=4");
  pin_config_from_string("rms_norm:" + impl + ":rows_per_task=64");
  EXPECT_EQ(problem()->describe_dispatch(), impl + " (pinned) rows_per_task=64");
  auto subject = problem();
  EXPECT_TRUE(subject->check("", nullptr).passed);
}

TEST_F(DispatchTest, PinnedConfigOutsideTheSpaceIsAClearError) {
  pin_config_from_string("rms_norm:" + best_impl() + ":rows_per_task=3");
  auto subject = problem();
  EXPECT_THROW(subject->run("", nullptr), Error);
  EXPECT_THROW(pin_config_from_string("rms_norm:rows_per_task=3"), Error);
  EXPECT_THROW(pin_config_from_string("rms_norm:avx2:rows_per_task"), Error);
}

TEST_F(DispatchTest, StaleTunedConfigFallsBackToTheHeuristic) {
  dispatch_table().set_tuned("rms_norm", best_impl(), problem()->shape_key(), ConfigParams::parse("tile=5"));
  EXPECT_NE(problem()->describe_dispatch().find("(heuristic)"), std::string::npos);
}

TEST_F(DispatchTest, IsaLimitSelectsTheLowerPaths) {
  set_isa_limit(Isa::scalar);
  EXPECT_EQ(dispatchable_impls(), std::vector<std::string>{"scalar"});
  EXPECT_EQ(problem()->describe_dispatch().rfind("scalar", 0), 0u);
  EXPECT_TRUE(problem()->check("", nullptr).passed);
  if (detected_isa() >= Isa::avx2) {
    set_isa_limit(Isa::avx2);
    EXPECT_EQ(problem()->describe_dispatch().rfind("avx2", 0), 0u);
    EXPECT_THROW(problem()->run("avx512", nullptr), Error);  // forcing an unusable path is an error
  }
}

TEST_F(DispatchTest, TuningCacheRoundTripInstallsOnlyThisMachinesEntries) {
  std::string path = ::testing::TempDir() + "lathe_tuning_test.json";
  TuningCache cache;
  TuningEntry mine = tuning_entry_for_this_machine("rms_norm", best_impl(), problem()->shape_key());
  mine.config = ConfigParams::parse("rows_per_task=16");
  TuningEntry foreign = mine;
  foreign.cpu = "Some Other CPU";
  foreign.config = ConfigParams::parse("rows_per_task=1");
  TuningEntry other_threads = mine;
  other_threads.threads = num_threads() + 5;
  cache.upsert(mine);
  cache.upsert(foreign);
  cache.upsert(other_threads);
  cache.upsert(mine);  // same key: replaced, not duplicated
  cache.save(path);
  std::string warning;
  TuningCache loaded = TuningCache::load(path, &warning);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(loaded.entries().size(), 3u);
  EXPECT_EQ(loaded.install(), 1);
  EXPECT_EQ(problem()->describe_dispatch(), best_impl() + " (tuned) rows_per_task=16");
  std::remove(path.c_str());
}

TEST_F(DispatchTest, CorruptedOrForeignCacheFilesAreReportedNotFatal) {
  std::string path = ::testing::TempDir() + "lathe_tuning_corrupt.json";
  for (const char* content : {"{not json", "[]", R"({"format": "lathe-tuning-cache", "version": 99, "entries": []})",
                              R"({"format": "lathe-tuning-cache", "version": 1, "entries": [{"op": 3}]})"}) {
    std::ofstream(path) << content;
    std::string warning;
    TuningCache cache = TuningCache::load(path, &warning);
    EXPECT_NE(warning, "") << content;
    EXPECT_TRUE(cache.entries().empty()) << content;
  }
  std::string warning;
  TuningCache::load(path + ".missing", &warning);
  EXPECT_EQ(warning, "");
  std::remove(path.c_str());
}

TEST_F(DispatchTest, AutotunerValidatesBeforeTimingAndPicksAPassingConfig) {
  auto subject = problem();
  TuneOptions options;
  options.timing = TimingOptions{0, 2, 2, 0};
  auto results = autotune(*subject, options);
  ASSERT_EQ(results.size(), dispatchable_impls().size());
  for (const auto& result : results) {
    ASSERT_GE(result.best_index, 0);
    EXPECT_TRUE(result.candidates[result.best_index].passed);
    EXPECT_EQ(result.candidates.size(), subject->config_space(result.impl).size());
  }
}

}  // namespace
}  // namespace lathe
