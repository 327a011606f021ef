// The suite's judge. Correctness: each problem runs on `correctness_sets` fresh seeded input sets;
// before every checked run its outputs are NaN-poisoned, and each output must pass the tolerance
// rule of ops/problem.h against the float64 reference (naive baseline: the same reference in
// float). A problem is correct only if every set passes; the vendor baseline is checked the same
// way (a wrong baseline would make every ratio meaningless).
// Timing: the plain reference (in float) is timed during the correctness sets, one run per set
// (it is slow, and its speedup column needs no finer precision; for an op's problem it is the
// op's own reference, single-threaded, so that column reads higher there than for compositions); lathe and the vendor
// get warm-up runs, then `blocks` blocks of `runs_per_block` runs, lathe and vendor blocks interleaved so both see the
// same machine; the median of all runs is reported, and the spread of the block medians (relative to the median) is the
// measured run-to-run noise. Cache-cold mode rotates through copies of the input and output buffers spanning
// `cold_bytes`. Results too good to be true (faster than the roofline floor) are flagged, and their speedups are
// computed from the floor instead of the measured time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lathe/bench/machine_peaks.h"
#include "lathe/bench/suite/suite_problem.h"
#include "lathe/bench/timing.h"

namespace lathe {

struct SuiteOptions {
  int correctness_sets = 5;
  uint64_t seed = 1;
  bool time = true;  // false: correctness only
  bool cold = false;
  int warmup_runs = 2;
  int blocks = 3;
  int runs_per_block = 7;  // blocks * runs_per_block >= 20 for a real measurement
  int64_t cold_bytes = int64_t(256) << 20;
  int max_rotation = 32;
};

struct SuiteTiming {
  double median = 0, min = 0;  // seconds
  double noise = 0;            // (max - min of block medians) / median
  int runs = 0;
};

struct SuiteResult {
  SuiteInfo info;
  std::string shape;
  bool correct = false;  // lathe passed every set
  int sets = 0, sets_passed = 0;
  std::string failure;  // the first failure, one line; empty when correct
  bool vendor_correct = false;
  std::string vendor_failure;
  bool timed = false;
  std::string cache_mode = "warm";       // "warm" or "cold"
  SuiteTiming lathe, vendor, reference;  // vendor.runs == 0: no vendor row
  OpCost cost;
  // From the cost and the peaks (apply_suite_peaks):
  double floor_seconds = 0, gflops = 0, gbytes = 0, roofline_percent = 0;
  std::string bound;         // "compute" or "memory"
  std::string memory_level;  // whose bandwidth the memory floor uses: "L1d", "L2", "L3" or "DRAM"
  bool beyond_roofline = false;
  double speedup_vs_reference = 0, speedup_vs_vendor = 0;  // > 1: lathe faster; 0: not measured

  bool has_vendor() const { return vendor.runs > 0; }
};

SuiteResult judge_problem(SuiteProblem& problem, const MachinePeaks& peaks, const SuiteOptions& options);

// options.warmup_runs per path, then options.blocks blocks of options.runs_per_block runs, the
// paths' blocks interleaved (a, b, c, a, b, c, ...) so all see the same machine
// (time_interleaved_blocks, bench/timing.h); one timing each. A TimedRun may also report a time
// measured elsewhere (the kernel lab's candidate runs in its own process). The vendor libraries
// run at lathe's thread count (match_vendor_threads, bench/vendor_setup.h).
std::vector<SuiteTiming> time_interleaved(const std::vector<TimedRun>& paths, const SuiteOptions& options);

// The first failing output of a check, one line ("" when every output passed).
std::string describe_check_failure(const CheckResult& result);
// (Re)computes the roofline fields and the speedups from the timings and these peaks. The memory
// floor is cache-aware for warm timing (the bandwidth of the smallest cache level the working set,
// cost.bytes / threads, fits in; MachinePeaks::memory_gbytes) and DRAM's for cold timing, whose
// rotated buffers make every run start from memory.
void apply_suite_peaks(SuiteResult& result, const MachinePeaks& peaks);

// A wrong or crashed problem enters the geometric means with this speedup (an order of magnitude
// below break-even): never clipped to 1x, and always pulling the mean down.
constexpr double kFailurePenaltySpeedup = 0.1;

struct SuiteSummary {
  int problems = 0, correct = 0, with_vendor = 0, flagged = 0, timed = 0;
  double correct_percent = 0;
  double geomean_vs_reference = 0;          // every timed problem; failures count as the penalty
  double geomean_vs_reference_correct = 0;  // correct problems only
  double geomean_vs_vendor = 0;             // problems with a vendor row; failures as the penalty
  // fast_p: correct, not flagged, and more than p times faster than the vendor; counted over the
  // problems with a vendor row (with_vendor), the denominator printed beside them.
  int fast_1 = 0, fast_1_5 = 0, fast_2 = 0;
};

SuiteSummary summarize_suite(const std::vector<SuiteResult>& results);

}  // namespace lathe
