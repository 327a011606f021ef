#include "lathe/bench/suite/suite_compare.h"

#include <algorithm>
#include <cstdio>

namespace lathe {

const char* suite_verdict_name(SuiteVerdict verdict) {
  switch (verdict) {
    case SuiteVerdict::unchanged:
      return "within noise";
    case SuiteVerdict::slower:
      return "REGRESSED (slower)";
    case SuiteVerdict::faster:
      return "faster";
    case SuiteVerdict::newly_wrong:
      return "REGRESSED (now wrong)";
    case SuiteVerdict::still_wrong:
      return "still wrong";
    case SuiteVerdict::fixed:
      return "fixed (now correct)";
    case SuiteVerdict::not_comparable:
      return "not comparable";
    case SuiteVerdict::not_in_baseline:
      return "new (not in baseline)";
  }
  return "?";
}

std::vector<SuiteComparison> compare_with_baseline(const std::vector<SuiteResult>& current, const Json& baseline,
                                                   double noise_floor) {
  const Json* problems = baseline.is_object() ? baseline.find("problems") : nullptr;
  LATHE_CHECK(problems && problems->is_array(), "baseline is not a suite report (no 'problems' array)");
  std::vector<SuiteComparison> comparisons;
  for (const auto& result : current) {
    SuiteComparison comparison;
    comparison.name = result.info.name;
    const Json* old = nullptr;
    for (const auto& item : problems->items("problems"))
      if (item.is_object() && item.get("name").is_string() && item.get("name").as_string() == result.info.name)
        old = &item;
    if (!old) {
      comparison.verdict = SuiteVerdict::not_in_baseline;
      comparisons.push_back(comparison);
      continue;
    }
    bool was_correct = old->get("correct").as_bool("baseline 'correct'");
    if (was_correct && !result.correct)
      comparison.verdict = SuiteVerdict::newly_wrong;
    else if (!was_correct && !result.correct)
      comparison.verdict = SuiteVerdict::still_wrong;
    else if (!was_correct && result.correct)
      comparison.verdict = SuiteVerdict::fixed;
    if (comparison.verdict != SuiteVerdict::unchanged || !result.timed) {
      if (comparison.verdict == SuiteVerdict::unchanged) {
        comparison.verdict = SuiteVerdict::not_comparable;
        comparison.note = "not timed in this run";
      }
      comparisons.push_back(comparison);
      continue;
    }
    std::string old_shape = old->get("shape").is_string() ? old->get("shape").as_string() : "";
    std::string old_mode = old->get("cache_mode").is_string() ? old->get("cache_mode").as_string() : "";
    const Json& old_lathe = old->get("lathe");
    if (old_shape != result.shape || old_mode != result.cache_mode || !old_lathe.is_object()) {
      comparison.verdict = SuiteVerdict::not_comparable;
      comparison.note =
          str_cat("baseline ", old_shape, " (", old_mode, "), now ", result.shape, " (", result.cache_mode, ")");
      comparisons.push_back(comparison);
      continue;
    }
    comparison.baseline_seconds = old_lathe.get("median_seconds").as_number("baseline median_seconds");
    double old_noise = old_lathe.get("noise").as_number("baseline noise");
    comparison.current_seconds = result.lathe.median;
    if (comparison.baseline_seconds <= 0) {
      comparison.verdict = SuiteVerdict::not_comparable;
      comparison.note = "baseline not timed";
      comparisons.push_back(comparison);
      continue;
    }
    comparison.ratio = comparison.current_seconds / comparison.baseline_seconds;
    comparison.threshold = std::max({old_noise, result.lathe.noise, noise_floor});
    if (comparison.ratio > 1 + comparison.threshold)
      comparison.verdict = SuiteVerdict::slower;
    else if (comparison.ratio < 1 / (1 + comparison.threshold))
      comparison.verdict = SuiteVerdict::faster;
    comparisons.push_back(comparison);
  }
  return comparisons;
}

std::string format_comparison(const std::vector<SuiteComparison>& comparisons) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-38s %12s %12s %8s %8s  %s\n", "problem", "baseline ms", "now ms", "ratio",
                "noise", "verdict");
  out += line;
  int regressions = 0;
  for (const auto& comparison : comparisons) {
    regressions += comparison.regressed();
    std::snprintf(line, sizeof line, "%-38s %12.3f %12.3f %7.2fx %7.1f%%  %s%s%s\n", comparison.name.c_str(),
                  comparison.baseline_seconds * 1e3, comparison.current_seconds * 1e3, comparison.ratio,
                  100.0 * comparison.threshold, suite_verdict_name(comparison.verdict),
                  comparison.note.empty() ? "" : ": ", comparison.note.c_str());
    out += line;
  }
  out += str_cat(regressions, " regression(s) against the baseline\n");
  return out;
}

}  // namespace lathe
