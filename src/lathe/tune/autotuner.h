// Exhaustive autotuning of one op problem: for each usable implementation, every config in its
// space is first checked against the float64 reference (a failing candidate is recorded and
// skipped, never timed), then timed; the lowest median wins. The heuristic's time is measured
// too so the report shows what tuning bought.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lathe/bench/timing.h"
#include "lathe/ops/problem.h"

namespace lathe {

struct TuneCandidate {
  ConfigParams config;
  bool passed = false;
  std::string failure;  // why it was skipped
  TimingStats timing;
};

struct TuneResult {
  std::string op, impl, shape_key;
  std::vector<TuneCandidate> candidates;
  int best_index = -1;  // into candidates; -1 when every candidate failed
  ConfigParams heuristic;
  double heuristic_median = 0;
};

struct TuneOptions {
  std::string only_impl;  // empty: all usable implementations
  TimingOptions timing{1, 5, 200, 0.1};
  std::function<void(const std::string& line)> progress;  // one line per candidate
};

std::vector<TuneResult> autotune(OpProblem& problem, const TuneOptions& options);

}  // namespace lathe
