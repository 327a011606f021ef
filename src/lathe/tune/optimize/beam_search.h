// Beam search over kernel schedules of any family (kernel_family.h), guided by a cost model and
// corrected by measurement, as the compiler-like search of the kernel-agent work lathe follows:
//   1. every schedule one granular step (KernelSpace::moves) from the beam is a candidate;
//   2. candidates not seen before are ranked by the cost model's prediction times a correction
//      learned from the measured ones (the geometric mean of measured / predicted over the
//      candidates of the same structure (KernelSpace::structure: GEMM packing form, one- or
//      two-pass rows), else all): the profile feeds the next step's ranking;
//   3. the best `per_step` are measured (a structure never measured gets its best candidate
//      in, so a structural change is tried even when the model prefers small tweaks) (in `lathe optimize`: the kernel
//      lab's correctness check, then timing; a candidate that fails is recorded with its verdict and never enters the
//      beam);
//   4. the beam becomes the `beam` fastest measured schedules; the search stops when a step brings
//      no improvement `patience` times, after `max_steps`, or before a candidate that would
//      likely end past the budget (at the mean time per candidate so far).
// Deterministic for deterministic predict / measure / clock functions (ties break on the key).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lathe/core/json.h"
#include "lathe/tune/optimize/kernel_family.h"

namespace lathe {

struct SearchMeasurement {
  bool passed = false;
  std::string verdict;  // the lab's verdict ("pass", "wrong", "compile-error", ...)
  std::string detail;
  double seconds = 0;     // median time when passed
  bool compiled = false;  // a compiler ran (false: its object came from the cache, or it failed before)
};

struct SearchOptions {
  int beam = 3;
  int per_step = 0;  // candidates measured per step; 0: 2 * beam
  int max_steps = 12;
  int patience = 2;
  double budget_seconds = 300;
  std::string start;  // the first schedule (a key of the space); empty: the space's naive start
};

struct SearchCandidate {
  int step = 0;              // 0: the start
  std::string move, parent;  // the granular step and the schedule it was applied to (keys)
  Schedule schedule;
  double predicted_seconds = 0, ranked_seconds = 0;  // the model's figure, and corrected by measurements
  SearchMeasurement measurement;
  double at_seconds = 0;  // since the search started
};

struct SearchStep {
  int step = 0;
  int measured = 0;
  double best_seconds = 0;
  std::string best_key;
  double at_seconds = 0;
};

struct SearchTrace {
  std::vector<SearchCandidate> candidates;
  std::vector<SearchStep> steps;
  bool found = false;
  Schedule best;
  double best_seconds = 0;
  std::string stop_reason;
  int measured() const { return static_cast<int>(candidates.size()); }
  int compiled() const;
  int passed() const;
  Json to_json() const;
};

using PredictFn = std::function<double(const Schedule&)>;
using MeasureFn = std::function<SearchMeasurement(const Schedule&)>;
using ClockFn = std::function<double()>;

// From options.start (else space.naive()), moving by space.moves().
SearchTrace beam_search(const KernelSpace& space, const PredictFn& predict, const MeasureFn& measure,
                        const SearchOptions& options, const ClockFn& clock);

}  // namespace lathe
