// The suite's judge, summary and regression comparison on small hand-made problems whose verdicts
// are known by construction, plus the registry's coverage promises (>= 50 problems, >= 17 LLM ops,
// >= 33 fusions). Every registered problem's correctness at its --quick shape is checked by the
// bench_suite_quick ctest (`lathe bench --suite --quick`).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "lathe/bench/suite/suite_compare.h"
#include "lathe/bench/suite/suite_judge.h"
#include "lathe/bench/suite/suite_op_problem.h"
#include "lathe/bench/suite/suite_report.h"
#include "test_seed.h"

namespace lathe {
namespace {

// y = 2 x + 1 over n elements; the lathe path can be made wrong in chosen ways.
enum class Flaw { none, skips_last_element, off_on_some_seeds, claims_huge_flops, throws };

class DoublingProblem : public SuiteProblemWithReference<DoublingProblem> {
 public:
  DoublingProblem(Flaw flaw, bool vendor_wrong = false)
      : SuiteProblemWithReference(SuiteInfo{"doubling", "llm", "y = 2x + 1", "none", "loop", "loop"}, "n=1000"),
        flaw_(flaw),
        vendor_wrong_(vendor_wrong) {
    add_input("x", {1000});
    add_output("y", {1000});
  }
  OpCost cost() const override { return {flaw_ == Flaw::claims_huge_flops ? 1e16 : 2000.0, io_bytes()}; }
  void run_lathe() override {
    const float* x = in_f32(0);
    float* y = out_f32(0);
    ++lathe_runs;
    seen_inputs.insert(x);
    if (flaw_ == Flaw::throws) throw_error("doubling: no kernel for this shape");
    int64_t count = flaw_ == Flaw::skips_last_element ? 999 : 1000;
    for (int64_t i = 0; i < count; ++i) y[i] = 2 * x[i] + 1;
    // Wrong by far more than rounding when the first input is positive (about half the sets).
    if (flaw_ == Flaw::off_on_some_seeds && x[0] > 0) y[0] += 1e-3f;
  }
  void run_vendor() override {
    for (int64_t i = 0; i < 1000; ++i) out_f32(0)[i] = 2 * in_f32(0)[i] + (vendor_wrong_ ? 1.5f : 1.0f);
  }
  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    for (size_t i = 0; i < io.in(0).size(); ++i) io.out(0)[i] = T(2) * io.in(0)[i] + T(1);
  }

  int lathe_runs = 0;
  std::set<const float*> seen_inputs;

 private:
  Flaw flaw_;
  bool vendor_wrong_;
};

MachinePeaks test_peaks() {
  MachinePeaks peaks;
  peaks.f32_gflops = 1e6;  // high enough that no honest run of these tiny problems is beyond it
  peaks.copy_gbytes = 1e6;
  return peaks;
}

SuiteOptions fast_options() {
  SuiteOptions options;
  options.seed = test_seed();
  options.warmup_runs = 1;
  options.blocks = 2;
  options.runs_per_block = 3;
  return options;
}

TEST(SuiteJudge, CorrectProblemPassesEverySetAndIsTimed) {
  DoublingProblem problem(Flaw::none);
  SuiteResult result = judge_problem(problem, test_peaks(), fast_options());
  EXPECT_TRUE(result.correct) << result.failure << " seed " << test_seed();
  EXPECT_EQ(result.sets_passed, 5);
  EXPECT_TRUE(result.vendor_correct);
  EXPECT_TRUE(result.timed);
  EXPECT_EQ(result.lathe.runs, 6);
  EXPECT_EQ(result.vendor.runs, 6);
  EXPECT_EQ(result.reference.runs, 5);       // one float reference run per input set
  EXPECT_EQ(problem.lathe_runs, 5 + 1 + 6);  // checks, warm-up, timed
  EXPECT_FALSE(result.beyond_roofline);
  EXPECT_NEAR(result.speedup_vs_vendor, result.vendor.median / result.lathe.median, 1e-12);
}

TEST(SuiteJudge, UnwrittenOutputIsCaughtByNanPoisoning) {
  DoublingProblem problem(Flaw::skips_last_element);
  SuiteResult result = judge_problem(problem, test_peaks(), fast_options());
  EXPECT_FALSE(result.correct);
  EXPECT_EQ(result.sets_passed, 0);
  EXPECT_NE(result.failure.find("1 NaN"), std::string::npos) << result.failure;
}

TEST(SuiteJudge, ThrowingPathIsWrongAndNotTimed) {
  DoublingProblem problem(Flaw::throws);
  SuiteResult result = judge_problem(problem, test_peaks(), fast_options());
  EXPECT_FALSE(result.correct);
  EXPECT_NE(result.failure.find("threw: doubling: no kernel"), std::string::npos) << result.failure;
  EXPECT_FALSE(result.timed);
  EXPECT_EQ(result.lathe.runs, 0);
  EXPECT_EQ(result.vendor.runs, 6);  // the vendor row is still measured
  EXPECT_EQ(problem.lathe_runs, 5);
}

TEST(SuiteJudge, OneFailingSetOfFiveMakesTheProblemWrong) {
  // Find a seed whose five sets include both a passing and a failing one, so the rule "correct
  // only if all pass" is what decides.
  for (uint64_t seed = test_seed(); seed < test_seed() + 50; ++seed) {
    DoublingProblem problem(Flaw::off_on_some_seeds);
    SuiteOptions options = fast_options();
    options.seed = seed;
    options.time = false;
    SuiteResult result = judge_problem(problem, test_peaks(), options);
    if (result.sets_passed == 0 || result.sets_passed == 5) continue;
    EXPECT_FALSE(result.correct) << "seed " << seed;
    EXPECT_NE(result.failure.find("output y"), std::string::npos);
    return;
  }
  FAIL() << "no seed mixed passing and failing sets, seed " << test_seed();
}

TEST(SuiteJudge, WrongVendorBaselineIsReported) {
  DoublingProblem problem(Flaw::none, true);
  SuiteResult result = judge_problem(problem, test_peaks(), fast_options());
  EXPECT_TRUE(result.correct);
  EXPECT_FALSE(result.vendor_correct);
  EXPECT_FALSE(result.vendor_failure.empty());
}

TEST(SuiteJudge, FasterThanTheRooflineIsFlaggedAndCappedAtTheFloor) {
  DoublingProblem problem(Flaw::claims_huge_flops);
  SuiteResult result = judge_problem(problem, test_peaks(), fast_options());
  ASSERT_TRUE(result.correct);
  EXPECT_TRUE(result.beyond_roofline);
  EXPECT_GT(result.roofline_percent, 100);
  double floor = 1e16 / 1e15;  // 10 s at 10^6 GFLOP/s
  EXPECT_NEAR(result.floor_seconds, floor, floor * 1e-12);
  EXPECT_NEAR(result.speedup_vs_vendor, result.vendor.median / floor, 1e-12);
  SuiteSummary summary = summarize_suite({result});
  EXPECT_EQ(summary.flagged, 1);
  EXPECT_EQ(summary.fast_1, 0);
}

TEST(SuiteJudge, ColdModeRotatesInputBuffers) {
  DoublingProblem problem(Flaw::none);
  SuiteOptions options = fast_options();
  options.cold = true;
  options.cold_bytes = 40000;  // 5 copies of the 8000-byte buffers
  SuiteResult result = judge_problem(problem, test_peaks(), options);
  EXPECT_TRUE(result.correct);
  EXPECT_EQ(result.cache_mode, "cold");
  EXPECT_GE(problem.seen_inputs.size(), 5u);
}

SuiteResult timed_result(const std::string& name, bool correct, double lathe, double vendor, double reference) {
  SuiteResult result;
  result.info.name = name;
  result.info.vendor = vendor > 0 ? "vendor" : "";
  result.shape = "n=1";
  result.correct = correct;
  result.timed = true;
  result.lathe = {lathe, lathe, 0.02, 21};
  if (vendor > 0) result.vendor = {vendor, vendor, 0.02, 21};
  result.reference = {reference, reference, 0, 5};
  result.cost = {1, 1};
  apply_suite_peaks(result, test_peaks());
  return result;
}

TEST(SuiteSummaryTest, GeomeanCountsFailuresAsThePenaltyAndFastPOverVendorRows) {
  std::vector<SuiteResult> results = {
      timed_result("a", true, 1.0, 2.0, 4.0),     // 4x reference, 2x vendor
      timed_result("b", true, 1.0, 1.2, 1.0),     // 1x reference, 1.2x vendor
      timed_result("c", true, 2.0, 1.0, 1.0),     // 0.5x reference, 0.5x vendor (not clipped)
      timed_result("d", false, 1.0, 10.0, 10.0),  // wrong: penalty in both means, never fast
      timed_result("e", true, 1.0, 0.0, 8.0),     // no vendor: 8x reference
  };
  SuiteSummary summary = summarize_suite(results);
  EXPECT_EQ(summary.problems, 5);
  EXPECT_EQ(summary.correct, 4);
  EXPECT_DOUBLE_EQ(summary.correct_percent, 80.0);
  double p = kFailurePenaltySpeedup;
  EXPECT_NEAR(summary.geomean_vs_reference, std::pow(4.0 * 1.0 * 0.5 * p * 8.0, 1.0 / 5), 1e-12);
  EXPECT_NEAR(summary.geomean_vs_reference_correct, std::pow(4.0 * 1.0 * 0.5 * 8.0, 1.0 / 4), 1e-12);
  EXPECT_NEAR(summary.geomean_vs_vendor, std::pow(2.0 * 1.2 * 0.5 * p, 1.0 / 4), 1e-12);
  EXPECT_EQ(summary.with_vendor, 4);
  EXPECT_EQ(summary.fast_1, 2);
  EXPECT_EQ(summary.fast_1_5, 1);
  EXPECT_EQ(summary.fast_2, 0);  // 2.0x is not more than 2x
}

TEST(SuiteCompare, FlagsSlowdownsBeyondNoiseAndNewFailuresOnly) {
  std::vector<SuiteResult> baseline_results = {
      timed_result("steady", true, 1.0, 0, 1), timed_result("slower", true, 1.0, 0, 1),
      timed_result("noisy", true, 1.0, 0, 1), timed_result("broken", true, 1.0, 0, 1),
      timed_result("faster", true, 1.0, 0, 1)};
  baseline_results[2].lathe.noise = 0.5;
  Json baseline = suite_report_json(make_suite_report(baseline_results, test_peaks()), Json::object());
  baseline = Json::parse(baseline.dump());  // through the file format
  std::vector<SuiteResult> current = {
      timed_result("steady", true, 1.03, 0, 1), timed_result("slower", true, 1.3, 0, 1),
      timed_result("noisy", true, 1.3, 0, 1),   timed_result("broken", false, 1.0, 0, 1),
      timed_result("faster", true, 0.5, 0, 1),  timed_result("new", true, 1.0, 0, 1)};
  auto comparisons = compare_with_baseline(current, baseline, 0.05);
  ASSERT_EQ(comparisons.size(), 6u);
  EXPECT_EQ(comparisons[0].verdict, SuiteVerdict::unchanged);
  EXPECT_EQ(comparisons[1].verdict, SuiteVerdict::slower);
  EXPECT_NEAR(comparisons[1].ratio, 1.3, 1e-12);
  EXPECT_EQ(comparisons[2].verdict, SuiteVerdict::unchanged);  // within the baseline's 50% noise
  EXPECT_EQ(comparisons[3].verdict, SuiteVerdict::newly_wrong);
  EXPECT_EQ(comparisons[4].verdict, SuiteVerdict::faster);
  EXPECT_EQ(comparisons[5].verdict, SuiteVerdict::not_in_baseline);
  int regressions = 0;
  for (const auto& comparison : comparisons) regressions += comparison.regressed();
  EXPECT_EQ(regressions, 2);
  EXPECT_NE(format_comparison(comparisons).find("2 regression(s)"), std::string::npos);
}

TEST(SuiteCompare, DifferentShapeIsNotComparableAndBadBaselineThrows) {
  std::vector<SuiteResult> old = {timed_result("a", true, 1.0, 0, 1)};
  Json baseline = suite_report_json(make_suite_report(old, test_peaks()), Json::object());
  std::vector<SuiteResult> current = {timed_result("a", true, 9.0, 0, 1)};
  current[0].shape = "n=2";
  auto comparisons = compare_with_baseline(current, baseline, 0.05);
  EXPECT_EQ(comparisons[0].verdict, SuiteVerdict::not_comparable);
  EXPECT_FALSE(comparisons[0].regressed());
  EXPECT_THROW(compare_with_baseline(current, Json::parse("{\"rows\": []}"), 0.05), Error);
}

TEST(SuiteReport, TableJsonAndChartsNameEveryProblem) {
  std::vector<SuiteResult> results = {timed_result("alpha", true, 1.0, 2.0, 4.0),
                                      timed_result("beta<&>", false, 1.0, 0, 1)};
  SuiteReport report = make_suite_report(results, test_peaks());
  Json json = suite_report_json(report, Json::object());
  EXPECT_EQ(json.get("problems").size(), 2u);
  EXPECT_EQ(json.get("summary").get("correct").as_int(), 1);
  std::string svg = suite_to_svg(results, "t");
  EXPECT_NE(svg.find("alpha"), std::string::npos);
  EXPECT_NE(svg.find("beta&lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(suite_to_html(report, "t").find("<svg"), std::string::npos);
  EXPECT_NE(format_suite_row(results[1]).find("WRONG"), std::string::npos);
}

// Peaks with three cache levels whose bandwidths are far apart, so the chosen level is visible.
MachinePeaks cache_peaks() {
  MachinePeaks peaks;
  peaks.threads = 2;
  peaks.f32_gflops = 1;  // 1 GFLOP/s: a problem of 0 flops is memory-bound
  peaks.copy_gbytes = 10;
  peaks.caches = {
      {"L1d", 32 << 10, 1, 32 << 10, 1000}, {"L2", 1 << 20, 1, 1 << 20, 300}, {"L3", 32 << 20, 2, 16 << 20, 100}};
  return peaks;
}

TEST(SuiteRoofline, MemoryFloorUsesTheSmallestLevelTheWorkingSetPerThreadFitsIn) {
  MachinePeaks peaks = cache_peaks();
  std::string level;
  struct Case {
    double total_bytes;  // over 2 threads
    const char* level;
    double gbytes;
  } cases[] = {{2.0 * (32 << 10), "L1d", 1000}, {2.0 * (32 << 10) + 2, "L2", 300},  {2.0 * (1 << 20), "L2", 300},
               {2.0 * (16 << 20), "L3", 100},   {2.0 * (16 << 20) + 2, "DRAM", 10}, {1e12, "DRAM", 10}};
  for (const Case& c : cases) {
    EXPECT_EQ(peaks.memory_gbytes(c.total_bytes, false, &level), c.gbytes) << c.total_bytes;
    EXPECT_EQ(level, c.level) << c.total_bytes;
    EXPECT_DOUBLE_EQ(peaks.floor_seconds(0, c.total_bytes), c.total_bytes / (c.gbytes * 1e9));
    // Cold timing starts every run from DRAM, whatever the size.
    EXPECT_EQ(peaks.memory_gbytes(c.total_bytes, true, &level), 10);
    EXPECT_EQ(level, "DRAM");
  }
  // A level measured slower than a larger one (noise) never raises the floor above the larger's.
  peaks.caches[1].gbytes = 50;
  EXPECT_EQ(peaks.memory_gbytes(2.0 * (1 << 20), false, &level), 100);
  // DRAM is the higher of the copy and the streaming measurement.
  peaks.dram_stream_gbytes = 30;
  EXPECT_EQ(peaks.memory_gbytes(1e12, false, &level), 30);
  EXPECT_EQ(peaks.memory_gbytes(64, true), 30);
  peaks.dram_stream_gbytes = 0;
  // Without known caches (peaks from an older report), DRAM as before.
  peaks.caches.clear();
  EXPECT_EQ(peaks.memory_gbytes(64, false, &level), 10);
  EXPECT_EQ(level, "DRAM");
}

TEST(SuiteRoofline, WarmResultUsesItsCacheLevelAndColdResultDram) {
  SuiteResult warm = timed_result("w", true, 1e-3, 0, 1);
  warm.cost = {0, 2.0 * (1 << 20)};  // 1 MiB per thread: L2
  SuiteResult cold = warm;
  cold.cache_mode = "cold";
  MachinePeaks peaks = cache_peaks();
  apply_suite_peaks(warm, peaks);
  apply_suite_peaks(cold, peaks);
  EXPECT_EQ(warm.memory_level, "L2");
  EXPECT_EQ(warm.bound, "memory");
  EXPECT_DOUBLE_EQ(warm.floor_seconds, 2.0 * (1 << 20) / 300e9);
  EXPECT_EQ(cold.memory_level, "DRAM");
  EXPECT_DOUBLE_EQ(cold.floor_seconds, 2.0 * (1 << 20) / 10e9);
}

TEST(SuiteReport, EveryFigureComesFromTheReportsOnePeaks) {
  // Judged against low start-of-run peaks (as a loaded start measures them), reported against others.
  DoublingProblem problem(Flaw::none);
  MachinePeaks start = test_peaks();
  start.f32_gflops = 1e-9, start.copy_gbytes = 1e-9;  // every row beyond the roofline at the start
  SuiteResult judged = judge_problem(problem, start, fast_options());
  ASSERT_TRUE(judged.beyond_roofline);
  std::string progress = format_suite_progress_row(judged);
  EXPECT_EQ(progress.find("beyond"), std::string::npos);  // streamed rows show nothing peak-derived
  MachinePeaks final_peaks = cache_peaks();
  final_peaks.f32_gflops = 1e6;
  SuiteReport report = make_suite_report({judged, timed_result("b", true, 1.0, 2.0, 4.0)}, final_peaks);
  for (const SuiteResult& result : report.results) {
    SuiteResult recomputed = result;
    apply_suite_peaks(recomputed, final_peaks);
    EXPECT_DOUBLE_EQ(result.floor_seconds, recomputed.floor_seconds) << result.info.name;
    EXPECT_DOUBLE_EQ(result.roofline_percent, recomputed.roofline_percent) << result.info.name;
  }
  EXPECT_FALSE(report.results[0].beyond_roofline);
  EXPECT_EQ(report.summary.flagged, 0);
  Json json = suite_report_json(report, Json::object());
  EXPECT_DOUBLE_EQ(json.get("peaks").get("f32_gflops").as_number(), 1e6);
  EXPECT_EQ(json.get("peaks").get("caches").size(), 3u);
  EXPECT_DOUBLE_EQ(json.get("problems").items()[0].get("roofline_percent").as_number(),
                   report.results[0].roofline_percent);
  EXPECT_EQ(format_suite_table(report).find("beyond"), std::string::npos);
}

// A suite problem of an op is that op's registered problem: the same inputs for the same seed
// (so the same outputs, bitwise), the same outputs checked, the same cost.
TEST(SuiteOpProblem, IsTheOpsOwnProblemAtTheShape) {
  const uint64_t seed = test_seed();
  OpSuiteProblem problem(SuiteInfo{"norm", "llm", "rms_norm", "none", "", ""}, "rms_norm", "rows=3,dim=17");
  problem.fill_inputs(seed);
  std::unique_ptr<OpProblem> own = find_op("rms_norm").make_problem(ShapeSpec::parse("rows=3,dim=17"), seed);
  problem.run_lathe();
  own->run("", nullptr);
  auto suite_outputs = problem.outputs(), op_outputs = own->outputs();
  ASSERT_EQ(suite_outputs.size(), op_outputs.size());
  for (size_t i = 0; i < op_outputs.size(); ++i) {
    EXPECT_EQ(suite_outputs[i].first, op_outputs[i].first);
    EXPECT_EQ(to_vector<double>(suite_outputs[i].second), to_vector<double>(op_outputs[i].second))
        << suite_outputs[i].first << " seed " << seed;
  }
  EXPECT_EQ(problem.cost().flops, own->cost().flops);
  EXPECT_EQ(problem.info().lathe_path, "rms_norm");
  SuiteOptions options = fast_options();
  options.time = false;
  SuiteResult result = judge_problem(problem, test_peaks(), options);
  EXPECT_TRUE(result.correct) << result.failure << " seed " << seed;
}

TEST(SuiteRegistry, CoversTheIssuesProblemCountsWithUniqueDescribedProblems) {
  std::set<std::string> names;
  int llm = 0, fusion = 0;
  for (const auto& entry : suite_entries()) {
    EXPECT_TRUE(names.insert(entry.name).second) << entry.name;
    llm += entry.family == "llm";
    fusion += entry.family == "fusion";
    auto problem = entry.make(true);
    EXPECT_EQ(problem->info().name, entry.name);
    EXPECT_FALSE(problem->info().model.empty()) << entry.name;
    EXPECT_FALSE(problem->info().lathe_path.empty()) << entry.name;
    EXPECT_GT(problem->cost().flops, 0) << entry.name;
  }
  EXPECT_GE(names.size(), 50u);
  EXPECT_GE(llm, 17);
  EXPECT_GE(fusion, 33);
}

}  // namespace
}  // namespace lathe
