// Reports of a suite run: a table (one row per problem, streamed as problems finish), a summary
// block, a JSON document (also the format of committed baselines, bench/baselines/*.json), and a
// self-contained SVG chart / HTML page of % of roofline per problem.
#pragma once

#include <string>
#include <vector>

#include "lathe/bench/machine_peaks.h"
#include "lathe/bench/suite/suite_judge.h"
#include "lathe/core/json.h"

namespace lathe {

std::string format_suite_header();
std::string format_suite_row(const SuiteResult& result);
std::string format_suite_summary(const SuiteSummary& summary);
// The `count` correct problems furthest from their roofline (lowest %), the next kernels to write.
std::vector<const SuiteResult*> furthest_from_roofline(const std::vector<SuiteResult>& results, size_t count);

Json suite_result_to_json(const SuiteResult& result);
Json suite_summary_to_json(const SuiteSummary& summary);
// The whole report: machine, peaks, options, results, summary.
Json suite_report_json(const std::vector<SuiteResult>& results, const SuiteSummary& summary, const MachinePeaks& peaks,
                       const Json& run_description);

std::string suite_to_svg(const std::vector<SuiteResult>& results, const std::string& title);
std::string suite_to_html(const std::vector<SuiteResult>& results, const SuiteSummary& summary,
                          const std::string& title);

}  // namespace lathe
