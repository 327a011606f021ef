// Reports of a suite run: progress rows streamed as problems finish (correctness and times only),
// then the final table, a summary block, a JSON document (also the format of committed baselines,
// bench/baselines/*.json), and a self-contained SVG chart / HTML page of % of roofline per problem.
// Every roofline figure of a report (table, summary, JSON, SVG, HTML) comes from the one
// MachinePeaks of its SuiteReport: the streamed rows print none, so no figure they show can be
// contradicted by the peaks measured at the end of the run.
#pragma once

#include <string>
#include <vector>

#include "lathe/bench/machine_peaks.h"
#include "lathe/bench/suite/suite_judge.h"
#include "lathe/core/json.h"

namespace lathe {

// A finished run: every result's roofline fields and speedups computed from `peaks`, and the summary.
struct SuiteReport {
  std::vector<SuiteResult> results;
  MachinePeaks peaks;
  SuiteSummary summary;
};
SuiteReport make_suite_report(std::vector<SuiteResult> results, const MachinePeaks& peaks);

// Streamed while the run goes: correctness and medians, nothing that depends on the peaks.
std::string format_suite_progress_header();
std::string format_suite_progress_row(const SuiteResult& result);
// The final table (header and one row per problem) with the roofline columns.
std::string format_suite_header();
std::string format_suite_row(const SuiteResult& result);
std::string format_suite_table(const SuiteReport& report);
std::string format_suite_summary(const SuiteSummary& summary);
// The `count` correct problems furthest from their roofline (lowest %), the next kernels to write.
std::vector<const SuiteResult*> furthest_from_roofline(const std::vector<SuiteResult>& results, size_t count);

Json suite_timing_to_json(const SuiteTiming& timing);  // median_seconds, min_seconds, noise, runs
Json suite_result_to_json(const SuiteResult& result);
Json suite_summary_to_json(const SuiteSummary& summary);
// The whole report: machine, peaks, options, results, summary.
Json suite_report_json(const SuiteReport& report, const Json& run_description);

std::string suite_to_svg(const std::vector<SuiteResult>& results, const std::string& title);
std::string suite_to_html(const SuiteReport& report, const std::string& title);

}  // namespace lathe
