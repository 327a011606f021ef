#include "lathe/bench/suite/suite_report.h"

#include <algorithm>
#include <cstdio>

#include "lathe/core/xml_escape.h"
#include "lathe/telemetry/svg_chart.h"

namespace lathe {

namespace {

std::string milliseconds(const SuiteTiming& timing) {
  if (timing.runs == 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", timing.median * 1e3);
  return text;
}

std::string ratio(double value) {
  if (value <= 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", value);
  return text;
}

// Shared by the progress row and the final row.
std::string correctness_flags(const SuiteResult& result) {
  std::string flags;
  if (!result.correct) flags += "WRONG ";
  if (!result.info.vendor.empty() && !result.vendor_correct) flags += "vendor-wrong ";
  return flags;
}

std::string noise_text(const SuiteTiming& timing) {
  if (timing.runs == 0) return "-";
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * timing.noise);
  return text;
}

std::string failure_lines(const SuiteResult& result) {
  std::string out;
  if (!result.failure.empty()) out += "    lathe failure: " + result.failure + "\n";
  if (!result.vendor_failure.empty()) out += "    vendor failure: " + result.vendor_failure + "\n";
  return out;
}

}  // namespace

Json suite_timing_to_json(const SuiteTiming& timing) {
  Json json = Json::object();
  json.set("median_seconds", timing.median);
  json.set("min_seconds", timing.min);
  json.set("noise", timing.noise);
  json.set("runs", timing.runs);
  return json;
}

SuiteReport make_suite_report(std::vector<SuiteResult> results, const MachinePeaks& peaks) {
  SuiteReport report;
  report.results = std::move(results);
  report.peaks = peaks;
  for (auto& result : report.results) apply_suite_peaks(result, peaks);
  report.summary = summarize_suite(report.results);
  return report;
}

std::string format_suite_progress_header() {
  char line[256];
  std::snprintf(line, sizeof line, "%-38s %-6s %-7s %10s %6s %10s %10s  %s\n", "problem", "family", "correct",
                "lathe ms", "noise", "vendor ms", "ref ms", "flags");
  return line;
}

std::string format_suite_progress_row(const SuiteResult& result) {
  char line[512];
  std::string correct = str_cat(result.sets_passed, "/", result.sets);
  std::snprintf(line, sizeof line, "%-38s %-6s %-7s %10s %6s %10s %10s  %s\n", result.info.name.c_str(),
                result.info.family.c_str(), correct.c_str(), milliseconds(result.lathe).c_str(),
                noise_text(result.lathe).c_str(), milliseconds(result.vendor).c_str(),
                milliseconds(result.reference).c_str(), correctness_flags(result).c_str());
  return line + failure_lines(result);
}

std::string format_suite_table(const SuiteReport& report) {
  std::string table = format_suite_header();
  for (const auto& result : report.results) table += format_suite_row(result);
  return table;
}

std::string format_suite_header() {
  char line[512];
  std::snprintf(line, sizeof line, "%-38s %-6s %-7s %10s %6s %10s %10s %8s %8s %8s %7s %6s  %s\n", "problem", "family",
                "correct", "lathe ms", "noise", "vendor ms", "ref ms", "x ref", "x vendor", "GFLOP/s", "GB/s", "%roof",
                "flags");
  return line;
}

std::string format_suite_row(const SuiteResult& result) {
  char line[1024];
  std::string correct = str_cat(result.sets_passed, "/", result.sets);
  std::string flags = correctness_flags(result);
  if (result.beyond_roofline) flags += "beyond-roofline(speedups capped) ";
  if (result.timed && !result.bound.empty())
    flags += result.bound == "memory" ? str_cat("memory (", result.memory_level, ")") : result.bound;
  std::snprintf(line, sizeof line, "%-38s %-6s %-7s %10s %6s %10s %10s %8s %8s %8.1f %7.1f %5.1f%%  %s\n",
                result.info.name.c_str(), result.info.family.c_str(), correct.c_str(),
                milliseconds(result.lathe).c_str(), noise_text(result.lathe).c_str(),
                milliseconds(result.vendor).c_str(), milliseconds(result.reference).c_str(),
                ratio(result.speedup_vs_reference).c_str(), ratio(result.speedup_vs_vendor).c_str(), result.gflops,
                result.gbytes, result.roofline_percent, flags.c_str());
  return line + failure_lines(result);
}

std::string format_suite_summary(const SuiteSummary& summary) {
  char text[2048];
  std::snprintf(text, sizeof text,
                "correct: %d/%d (%.1f%%)\n"
                "geomean speedup vs the plain reference: %.2fx over %d timed problems (a wrong problem counts as "
                "%.1fx; correct only: %.2fx)\n"
                "geomean speedup vs the vendor baseline: %.2fx over %d problems with one\n"
                "fast_1 / fast_1.5 / fast_2 vs the vendor baseline: %d / %d / %d of %d problems with one "
                "(%.1f%% / %.1f%% / %.1f%%; of all %d problems: %.1f%% / %.1f%% / %.1f%%)\n"
                "flagged beyond the roofline: %d\n",
                summary.correct, summary.problems, summary.correct_percent, summary.geomean_vs_reference,
                summary.problems, kFailurePenaltySpeedup, summary.geomean_vs_reference_correct,
                summary.geomean_vs_vendor, summary.with_vendor, summary.fast_1, summary.fast_1_5, summary.fast_2,
                summary.with_vendor, summary.with_vendor ? 100.0 * summary.fast_1 / summary.with_vendor : 0.0,
                summary.with_vendor ? 100.0 * summary.fast_1_5 / summary.with_vendor : 0.0,
                summary.with_vendor ? 100.0 * summary.fast_2 / summary.with_vendor : 0.0, summary.problems,
                summary.problems ? 100.0 * summary.fast_1 / summary.problems : 0.0,
                summary.problems ? 100.0 * summary.fast_1_5 / summary.problems : 0.0,
                summary.problems ? 100.0 * summary.fast_2 / summary.problems : 0.0, summary.flagged);
  return text;
}

std::vector<const SuiteResult*> furthest_from_roofline(const std::vector<SuiteResult>& results, size_t count) {
  std::vector<const SuiteResult*> timed;
  for (const auto& result : results)
    if (result.correct && result.timed) timed.push_back(&result);
  std::sort(timed.begin(), timed.end(),
            [](const SuiteResult* a, const SuiteResult* b) { return a->roofline_percent < b->roofline_percent; });
  if (timed.size() > count) timed.resize(count);
  return timed;
}

Json suite_result_to_json(const SuiteResult& result) {
  Json json = Json::object();
  json.set("name", result.info.name);
  json.set("family", result.info.family);
  json.set("summary", result.info.summary);
  json.set("model", result.info.model);
  json.set("shape", result.shape);
  json.set("lathe_path", result.info.lathe_path);
  json.set("vendor", result.info.vendor);
  json.set("correct", result.correct);
  json.set("sets_passed", result.sets_passed);
  json.set("sets", result.sets);
  json.set("failure", result.failure);
  json.set("vendor_correct", result.vendor_correct);
  json.set("vendor_failure", result.vendor_failure);
  json.set("timed", result.timed);
  json.set("cache_mode", result.cache_mode);
  json.set("lathe", suite_timing_to_json(result.lathe));
  json.set("vendor_timing", suite_timing_to_json(result.vendor));
  json.set("reference", suite_timing_to_json(result.reference));
  json.set("flops", result.cost.flops);
  json.set("bytes", result.cost.bytes);
  json.set("floor_seconds", result.floor_seconds);
  json.set("gflops_per_second", result.gflops);
  json.set("gbytes_per_second", result.gbytes);
  json.set("roofline_percent", result.roofline_percent);
  json.set("bound", result.bound);
  json.set("memory_level", result.memory_level);
  json.set("beyond_roofline", result.beyond_roofline);
  json.set("speedup_vs_reference", result.speedup_vs_reference);
  json.set("speedup_vs_vendor", result.speedup_vs_vendor);
  return json;
}

Json suite_summary_to_json(const SuiteSummary& summary) {
  Json json = Json::object();
  json.set("problems", summary.problems);
  json.set("correct", summary.correct);
  json.set("correct_percent", summary.correct_percent);
  json.set("geomean_speedup_vs_reference", summary.geomean_vs_reference);
  json.set("geomean_speedup_vs_reference_correct_only", summary.geomean_vs_reference_correct);
  json.set("failure_counts_as_speedup", kFailurePenaltySpeedup);
  json.set("geomean_speedup_vs_vendor", summary.geomean_vs_vendor);
  json.set("problems_with_vendor", summary.with_vendor);
  json.set("fast_1", summary.fast_1);
  json.set("fast_1_5", summary.fast_1_5);
  json.set("fast_2", summary.fast_2);
  json.set("flagged_beyond_roofline", summary.flagged);
  return json;
}

Json suite_report_json(const SuiteReport& report, const Json& run_description) {
  Json json = Json::object();
  json.set("run", run_description);
  json.set("peaks", report.peaks.to_json());
  json.set("summary", suite_summary_to_json(report.summary));
  Json furthest = Json::array();
  for (const SuiteResult* result : furthest_from_roofline(report.results, 5)) furthest.push(result->info.name);
  json.set("furthest_from_roofline", furthest);
  Json problems = Json::array();
  for (const auto& result : report.results) problems.push(suite_result_to_json(result));
  json.set("problems", problems);
  return json;
}

std::string suite_to_svg(const std::vector<SuiteResult>& results, const std::string& title) {
  std::vector<PercentBar> bars;
  for (const SuiteResult& result : results) {
    PercentBar bar;
    bar.label = result.info.name;
    bar.percent = result.roofline_percent;
    bar.colour = !result.correct            ? "#d83b3b"
                 : result.beyond_roofline   ? "#999999"
                 : result.bound == "memory" ? "#e8912d"
                                            : "#3b7dd8";
    bar.right = str_cat(result.correct ? "" : "WRONG ", ratio(result.speedup_vs_vendor), " vendor, ",
                        ratio(result.speedup_vs_reference), " ref");
    bar.tooltip = result.info.summary + " | " + result.shape;
    bars.push_back(bar);
  }
  BarChartLayout layout;
  layout.row_height = 20;
  layout.label_width = 330;
  layout.bar_width = 400;
  layout.right_width = 330;
  return percent_bar_chart_svg(bars, title,
                               "% of roofline per problem (blue: compute-bound, orange: memory-bound, red: wrong, "
                               "grey: beyond the roofline); right: speedup vs vendor, vs reference",
                               layout);
}

std::string suite_to_html(const SuiteReport& report, const std::string& title) {
  const std::vector<SuiteResult>& results = report.results;
  std::string html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + escape_xml(title) +
                     "</title>\n<style>body{font-family:sans-serif;margin:20px}table{border-collapse:collapse;"
                     "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
                     "td:first-child,th:first-child{text-align:left}.wrong{background:#fdd}</style></head><body>\n";
  html += "<h2>" + escape_xml(title) + "</h2>\n<pre>" + escape_xml(format_suite_summary(report.summary)) + "</pre>\n";
  html += suite_to_svg(results, title);
  html +=
      "<table><tr><th>problem</th><th>family</th><th>correct</th><th>lathe ms</th><th>noise</th><th>vendor "
      "ms</th><th>reference ms</th><th>x ref</th><th>x vendor</th><th>GFLOP/s</th><th>GB/s</th><th>% "
      "roofline</th><th>shape</th><th>model</th><th>lathe path</th><th>vendor</th></tr>\n";
  char buffer[256];
  for (const auto& result : results) {
    std::snprintf(buffer, sizeof buffer, "%.1f%%", 100.0 * result.lathe.noise);
    std::string noise = buffer;
    std::snprintf(buffer, sizeof buffer, "%.1f</td><td>%.1f</td><td>%.1f%%", result.gflops, result.gbytes,
                  result.roofline_percent);
    html += str_cat("<tr", result.correct ? "" : " class=\"wrong\"", "><td>", escape_xml(result.info.name), "</td><td>",
                    result.info.family, "</td><td>", result.sets_passed, "/", result.sets, "</td><td>",
                    milliseconds(result.lathe), "</td><td>", noise, "</td><td>", milliseconds(result.vendor),
                    "</td><td>", milliseconds(result.reference), "</td><td>", ratio(result.speedup_vs_reference),
                    "</td><td>", ratio(result.speedup_vs_vendor), "</td><td>", buffer, "</td><td>",
                    escape_xml(result.shape), "</td><td>", escape_xml(result.info.model), "</td><td>",
                    escape_xml(result.info.lathe_path), "</td><td>", escape_xml(result.info.vendor), "</td></tr>\n");
  }
  html += "</table>\n</body></html>\n";
  return html;
}

}  // namespace lathe
