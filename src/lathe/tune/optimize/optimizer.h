// `lathe optimize PROBLEM...`: finds a kernel for the suite problems its kernel families cover
// (kernel_family.h: fused GEMMs, row reductions and norms) by beam search over schedules
// (beam_search.h), with no language model: the family's generator writes each candidate's source, the kernel lab
// (bench/lab/lab.h) compiles it, checks it against the float64 reference on fresh inputs and a hidden shape in its
// sandbox and times it, and the cost model of the family, corrected by those times, ranks the next step. The winner is
// judged once more by the full lab (5 sets, 2 hidden shapes, timed beside lathe's path and the vendor) with the same
// peaks. Results are cached per machine (a TuningCache file, op "optimize"); --emit writes the winner into the library
// (promotion, bench/suite/found/).
#pragma once

#include <string>
#include <vector>

#include "lathe/bench/lab/lab.h"
#include "lathe/bench/machine_peaks.h"
#include "lathe/core/json.h"
#include "lathe/tune/optimize/beam_search.h"

namespace lathe {

struct OptimizeOptions {
  SearchOptions search;
  bool quick = false;      // the problems' small --quick shapes
  bool use_cache = true;   // a cached winner for this machine skips the search (still judged)
  std::string cache_path;  // empty: default_optimize_cache_path()
  bool final_lab = true;   // judge the winner with the full lab (and time lathe and the vendor)
  LabLimits limits;
  bool verbose = true;  // one line per candidate on stderr
};

struct ProblemOptimization {
  std::string problem, shape;
  bool from_cache = false;
  SearchTrace trace;  // empty when from_cache
  double search_seconds = 0;
  bool found = false;
  Schedule winner;
  // The lathe op whose hand-tuned kernel is lathe's path here ("" for a composition): then
  // lathe_seconds / winner_seconds is the found kernel's share of the hand-tuned speed.
  std::string hand_tuned_op;
  std::string winner_source;
  LabReport final_report;  // when OptimizeOptions::final_lab
  // From the final report: the winner's median and lathe's and the vendor's (0: not timed).
  double winner_seconds = 0, lathe_seconds = 0, vendor_seconds = 0;
  bool winner_passed = false;  // the final lab's verdict (or the search's check without it)
};

// $LATHE_OPTIMIZE_CACHE, else the tuning cache's folder / optimize.json.
std::string default_optimize_cache_path();

// The suite problem's shape text at the size searched ("rows=2048,dim=4096").
std::string optimize_shape(const std::string& problem, bool quick);

// Throws lathe::Error for a problem the optimizer does not cover (the message lists them).
// `peaks` (the report's one set) is raised to the higher of it and a new measurement when a
// candidate is judged too fast against it (peaks measured on a busy machine come out low).
ProblemOptimization optimize_problem(const std::string& problem, const OptimizeOptions& options, MachinePeaks& peaks);

Json optimization_json(const std::vector<ProblemOptimization>& results, const MachinePeaks& peaks,
                       const std::string& cpu);
// A self-contained page: a summary table and, per problem, an SVG chart of the best time against
// the search step.
std::string optimization_html(const std::vector<ProblemOptimization>& results, const MachinePeaks& peaks,
                              const std::string& cpu);
std::string format_optimization_table(const std::vector<ProblemOptimization>& results);

// The generated source of `problem` under `schedule` ("field=value,..."; throws when it is not a
// schedule of the problem's space), as a lab candidate or (library_mode) as --emit writes it.
std::string optimize_source(const std::string& problem, const std::string& schedule, bool library_mode);

// A sample of the schedule space, each judged for correctness by the lab (fresh inputs at the
// problem's --quick shape and a hidden shape; no timing): `count` schedules, each a random walk of
// a few moves from the naive start drawn from `seed`, for each problem in turn. With `start` (a
// schedule key), walks of 0-3 moves from it instead: each problem's first sample is the start
// itself. Returns (problem, schedule key, verdict, detail) per sample.
struct ScheduleSample {
  std::string problem, key, verdict, detail;
};
std::vector<ScheduleSample> check_schedule_sample(const std::vector<std::string>& problems, int count, uint64_t seed,
                                                  const LabLimits& limits, const std::string& start = "");

// Promotion: writes DIR/found_<problem>_kernels.cc (the winner as a library kernel compiled per
// ISA) and rewrites DIR/found_kernel_list.inc from the kernels DIR holds. DIR is normally
// src/lathe/bench/suite/found/, where the suite's fusion problems pick the kernels up as their
// lathe path (found_kernel_registry.h); its test (found_kernel_registry_test.cc) checks every listed kernel.
// Returns the paths written.
std::vector<std::string> emit_found_kernel(const ProblemOptimization& result, const std::string& dir);
// Rewrites every found kernel in DIR under the schedules its header names, with the generator as it
// is now (after a change to the generated constants), and the list; returns the paths written.
// Throws lathe::Error when DIR is not a folder or a header names no schedule.
std::vector<std::string> regenerate_found_kernels(const std::string& dir);

}  // namespace lathe
