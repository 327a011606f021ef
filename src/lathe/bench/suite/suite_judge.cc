#include "lathe/bench/suite/suite_judge.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "lathe/bench/timing.h"
#include "lathe/bench/vendor_setup.h"
#include "lathe/core/clock.h"

namespace lathe {

namespace {

uint64_t set_seed(uint64_t seed, int set) { return seed * 1000003ull + 0x9e3779b97f4a7c15ull * (set + 1); }

// Runs one path against the references; returns "" or the first failure, one line.
std::string check_path(SuiteProblem& problem, const std::function<void()>& run, const ReferenceOutputs& references) {
  try {
    return describe_check_failure(check_run(problem, references, run));
  } catch (const std::exception& error) {
    return str_cat("threw: ", error.what());
  }
}

SuiteTiming summarize_samples(const InterleavedSamples& path) {
  SuiteTiming timing;
  timing.runs = static_cast<int>(path.samples.size());
  timing.median = median(path.samples);
  timing.min = *std::min_element(path.samples.begin(), path.samples.end());
  if (path.block_medians.size() > 1 && timing.median > 0) {
    auto [low, high] = std::minmax_element(path.block_medians.begin(), path.block_medians.end());
    timing.noise = (*high - *low) / timing.median;
  }
  return timing;
}

// Copies of the buffers spanning options.cold_bytes, so each timed run starts with cold caches.
size_t make_cold_copies(SuiteProblem& problem, const SuiteOptions& options) {
  int64_t bytes = std::max<int64_t>(1, problem.buffer_bytes());
  int64_t copies = std::clamp<int64_t>((options.cold_bytes + bytes - 1) / bytes, 2, options.max_rotation);
  for (int64_t copy = 0; copy < copies; ++copy)
    problem.add_cold_copy(set_seed(options.seed, 1000 + static_cast<int>(copy)));
  return static_cast<size_t>(copies);
}

}  // namespace

SuiteResult judge_problem(SuiteProblem& problem, const MachinePeaks& peaks, const SuiteOptions& options) {
  SuiteResult result;
  result.info = problem.info();
  result.shape = problem.shape_text();
  result.cost = problem.cost();
  result.cache_mode = options.cold ? "cold" : "warm";
  bool vendor = problem.has_vendor();
  bool lathe_ran = true, vendor_ran = vendor;
  result.vendor_correct = vendor;
  std::vector<double> reference_seconds;
  for (int set = 0; set < options.correctness_sets; ++set) {
    problem.fill_inputs(set_seed(options.seed, set));
    ReferenceOutputs references = compute_reference_outputs(problem);
    reference_seconds.push_back(references.naive_seconds);  // the naive reference doubles as the timed one
    std::string failure = check_path(
        problem, [&] { problem.run_lathe(); }, references);
    ++result.sets;
    if (failure.empty())
      ++result.sets_passed;
    else if (result.failure.empty())
      result.failure = str_cat("set ", set, ": ", failure);
    lathe_ran = lathe_ran && failure.rfind("threw", 0) != 0;  // a path that throws is not timed
    if (vendor) {
      std::string vendor_failure = check_path(
          problem, [&] { problem.run_vendor(); }, references);
      if (!vendor_failure.empty() && result.vendor_failure.empty())
        result.vendor_failure = str_cat("set ", set, ": ", vendor_failure);
      result.vendor_correct = result.vendor_correct && vendor_failure.empty();
      vendor_ran = vendor_ran && vendor_failure.rfind("threw", 0) != 0;
    }
  }
  result.correct = result.sets > 0 && result.sets_passed == result.sets;
  if (!options.time) return result;

  problem.fill_inputs(set_seed(options.seed, 0));
  result.cost = problem.cost();  // some costs depend on the inputs (context lengths, routing)
  size_t cold_copies = options.cold ? make_cold_copies(problem, options) : 0, next_copy = 0;
  auto before_each = [&] {
    if (cold_copies > 0) {
      problem.use_cold_copy(next_copy);
      next_copy = (next_copy + 1) % cold_copies;
    }
    problem.prepare_run();
  };
  std::vector<TimedRun> paths;
  if (lathe_ran) paths.push_back(timed_run([&] { problem.run_lathe(); }, before_each));
  if (vendor_ran) paths.push_back(timed_run([&] { problem.run_vendor(); }, before_each));
  std::vector<SuiteTiming> timings = time_interleaved(paths, options);
  if (lathe_ran) result.lathe = timings.front();
  if (vendor_ran) result.vendor = timings.back();
  result.reference.runs = static_cast<int>(reference_seconds.size());
  result.reference.median = median(reference_seconds);
  result.reference.min = *std::min_element(reference_seconds.begin(), reference_seconds.end());
  result.timed = lathe_ran;
  apply_suite_peaks(result, peaks);
  return result;
}

std::vector<SuiteTiming> time_interleaved(const std::vector<TimedRun>& paths, const SuiteOptions& options) {
  match_vendor_threads();  // a vendor path among them runs at lathe's thread count
  const std::vector<InterleavedSamples> timed =
      time_interleaved_blocks(paths, options.warmup_runs, options.blocks, options.runs_per_block);
  std::vector<SuiteTiming> timings;
  for (const auto& path : timed) timings.push_back(path.samples.empty() ? SuiteTiming{} : summarize_samples(path));
  return timings;
}

std::string describe_check_failure(const CheckResult& result) {
  for (const OutputCheck& check : result.outputs)
    if (!check.passed)
      return str_cat("output ", check.name, ": max_error ", check.max_error, " allowed ", check.allowed,
                     check.allowed_relative_norm > 0
                         ? str_cat(", rel_norm ", check.relative_norm, " allowed ", check.allowed_relative_norm)
                         : std::string(),
                     check.nan_count ? str_cat(", ", check.nan_count, " NaN") : std::string(), ", worst index ",
                     check.worst_index);
  return "";
}

void apply_suite_peaks(SuiteResult& result, const MachinePeaks& peaks) {
  if (!result.timed || result.lathe.median <= 0) return;
  bool cold = result.cache_mode == "cold";
  double compute_floor = peaks.floor_seconds(result.cost.flops, 0);
  double memory_floor = peaks.floor_seconds(0, result.cost.bytes, false, cold);
  peaks.memory_gbytes(result.cost.bytes, cold, &result.memory_level);
  result.floor_seconds = std::max(compute_floor, memory_floor);
  result.bound = compute_floor >= memory_floor ? "compute" : "memory";
  double seconds = result.lathe.median;
  result.gflops = result.cost.flops / seconds / 1e9;
  result.gbytes = result.cost.bytes / seconds / 1e9;
  result.roofline_percent = 100.0 * result.floor_seconds / seconds;
  result.beyond_roofline = result.roofline_percent > 100.0;
  // Never credit more speed than the roofline allows.
  double credited = std::max(seconds, result.floor_seconds);
  result.speedup_vs_reference = result.reference.median > 0 ? result.reference.median / credited : 0;
  result.speedup_vs_vendor = result.has_vendor() ? result.vendor.median / credited : 0;
}

SuiteSummary summarize_suite(const std::vector<SuiteResult>& results) {
  SuiteSummary summary;
  bool timing_run = std::any_of(results.begin(), results.end(), [](const SuiteResult& r) { return r.timed; });
  double log_reference = 0, log_reference_correct = 0, log_vendor = 0;
  int reference_count = 0, reference_correct_count = 0, vendor_count = 0;
  for (const auto& result : results) {
    ++summary.problems;
    summary.correct += result.correct;
    summary.flagged += result.beyond_roofline;
    summary.timed += result.timed;
    bool has_vendor = !result.info.vendor.empty();
    summary.with_vendor += has_vendor;
    if (!timing_run) continue;
    if (!result.correct) {  // wrong or crashed: the penalty, in both means
      log_reference += std::log(kFailurePenaltySpeedup), ++reference_count;
      if (has_vendor) log_vendor += std::log(kFailurePenaltySpeedup), ++vendor_count;
      continue;
    }
    if (result.speedup_vs_reference > 0) {
      log_reference += std::log(result.speedup_vs_reference), ++reference_count;
      log_reference_correct += std::log(result.speedup_vs_reference), ++reference_correct_count;
    }
    if (has_vendor && result.speedup_vs_vendor > 0) {
      log_vendor += std::log(result.speedup_vs_vendor), ++vendor_count;
      bool usable = !result.beyond_roofline;
      summary.fast_1 += usable && result.speedup_vs_vendor > 1.0;
      summary.fast_1_5 += usable && result.speedup_vs_vendor > 1.5;
      summary.fast_2 += usable && result.speedup_vs_vendor > 2.0;
    }
  }
  if (summary.problems) summary.correct_percent = 100.0 * summary.correct / summary.problems;
  if (reference_count) summary.geomean_vs_reference = std::exp(log_reference / reference_count);
  if (reference_correct_count)
    summary.geomean_vs_reference_correct = std::exp(log_reference_correct / reference_correct_count);
  if (vendor_count) summary.geomean_vs_vendor = std::exp(log_vendor / vendor_count);
  return summary;
}

}  // namespace lathe
