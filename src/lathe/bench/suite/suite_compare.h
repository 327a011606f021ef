// Regression tracking: compares a suite run with a committed baseline report (the JSON of
// suite_report.h). A problem regresses when its lathe median is slower than the baseline's by
// more than the run-to-run noise, max(baseline noise, current noise, noise_floor), or when it was
// correct in the baseline and is wrong now. Problems whose shape or cache mode differs are
// reported as not comparable, never as regressions.
#pragma once

#include <string>
#include <vector>

#include "lathe/bench/suite/suite_judge.h"
#include "lathe/core/json.h"

namespace lathe {

enum class SuiteVerdict { unchanged, slower, faster, newly_wrong, still_wrong, fixed, not_comparable, not_in_baseline };
const char* suite_verdict_name(SuiteVerdict verdict);

struct SuiteComparison {
  std::string name;
  SuiteVerdict verdict = SuiteVerdict::unchanged;
  double baseline_seconds = 0, current_seconds = 0;
  double ratio = 0;      // current / baseline
  double threshold = 0;  // relative noise allowed
  std::string note;
  bool regressed() const { return verdict == SuiteVerdict::slower || verdict == SuiteVerdict::newly_wrong; }
};

// Throws lathe::Error when the baseline is not a suite report.
std::vector<SuiteComparison> compare_with_baseline(const std::vector<SuiteResult>& current, const Json& baseline,
                                                   double noise_floor);
std::string format_comparison(const std::vector<SuiteComparison>& comparisons);

}  // namespace lathe
