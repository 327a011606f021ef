// The reports of `lathe optimize`: JSON (the search trace, the winner, the final lab's figures),
// an HTML page with one SVG chart of best time against search step per problem, and a table.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lathe/telemetry/svg_chart.h"
#include "lathe/tune/optimize/optimizer.h"

namespace lathe {

namespace {

double ratio(double peer, double winner) { return winner > 0 && peer > 0 ? peer / winner : 0; }

// The target for problems whose lathe path is a hand-tuned op kernel: the found kernel
// reaches at least this share of its speed (lathe's median / the found kernel's median).
constexpr double kHandTunedTarget = 0.9;

std::string two_decimals(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

// Best time so far (ms) after each measured candidate, and every passed candidate's time.
std::string search_chart(const ProblemOptimization& result) {
  LineChart chart;
  chart.title = result.problem + " (" + result.shape + ")";
  chart.subtitle = str_cat(result.trace.measured(), " candidates measured, ", result.trace.compiled(), " compiled, ",
                           result.trace.passed(), " passed; ", static_cast<int>(result.search_seconds), " s");
  chart.x_label = "candidate (search order)";
  chart.y_label = "median ms";
  LineSeries best{"best so far", "#3b7dd8", 1, 2, PointMarkers::none, {}, {}};
  LineSeries each{"candidate", "#999999", 0.8, 0, PointMarkers::all, {}, {}};
  double best_ms = 0;
  for (size_t i = 0; i < result.trace.candidates.size(); ++i) {
    const auto& c = result.trace.candidates[i];
    if (!c.measurement.passed) continue;
    double ms = c.measurement.seconds * 1e3;
    best_ms = best_ms == 0 ? ms : std::min(best_ms, ms);
    best.x.push_back(static_cast<double>(i + 1)), best.y.push_back(best_ms);
    each.x.push_back(static_cast<double>(i + 1)), each.y.push_back(ms);
  }
  std::vector<LineSeries> series = {each, best};
  auto add_level = [&](const char* label, const char* colour, double seconds) {
    if (seconds <= 0 || best.x.empty()) return;
    series.push_back(
        {label, colour, 1, 1.5, PointMarkers::none, {best.x.front(), best.x.back()}, {seconds * 1e3, seconds * 1e3}});
  };
  add_level("lathe (final run)", "#d83b3b", result.lathe_seconds);
  add_level("vendor (final run)", "#3bb03b", result.vendor_seconds);
  double low = 1e300, high = 0;
  for (const auto& s : series)
    for (double y : s.y) low = std::min(low, y), high = std::max(high, y);
  chart.series = series;
  chart.empty_message = "no candidate passed";
  chart.x_axis = choose_axis(1, std::max<double>(2, static_cast<double>(result.trace.candidates.size())), false, 1);
  chart.y_axis = high > 0 ? choose_axis(low * 0.9, high * 1.05, true) : choose_axis(0, 1, false);
  return line_chart_svg(chart);
}

}  // namespace

Json optimization_json(const std::vector<ProblemOptimization>& results, const MachinePeaks& peaks,
                       const std::string& cpu) {
  Json json = Json::object();
  json.set("format", "lathe-optimize-report");
  json.set("cpu", cpu);
  json.set("peaks", peaks.to_json());
  Json problems = Json::array();
  for (const auto& r : results) {
    Json row = Json::object();
    row.set("problem", r.problem);
    row.set("shape", r.shape);
    row.set("from_cache", r.from_cache);
    row.set("found", r.found);
    row.set("winner_passed", r.winner_passed);
    if (r.found) {
      row.set("winner", r.winner.to_json());
      row.set("winner_key", r.winner.key());
    }
    row.set("search_seconds", r.search_seconds);
    row.set("candidates_measured", r.trace.measured());
    row.set("candidates_compiled", r.trace.compiled());
    row.set("winner_seconds", r.winner_seconds);
    row.set("lathe_seconds", r.lathe_seconds);
    row.set("vendor_seconds", r.vendor_seconds);
    row.set("speedup_vs_lathe", ratio(r.lathe_seconds, r.winner_seconds));
    row.set("speedup_vs_vendor", ratio(r.vendor_seconds, r.winner_seconds));
    // The target: the found kernel against lathe's hand-tuned op kernel in the same run.
    if (!r.hand_tuned_op.empty()) {
      row.set("hand_tuned_op", r.hand_tuned_op);
      row.set("fraction_of_hand_tuned", ratio(r.lathe_seconds, r.winner_seconds));
    }
    row.set("trace", r.trace.to_json());
    if (!r.final_report.problem.empty()) row.set("final_lab", lab_report_json(r.final_report));
    problems.push(row);
  }
  json.set("problems", problems);
  int with_vendor = 0, fast = 0;
  double log_total = 0;
  for (const auto& r : results)
    if (r.winner_passed && r.vendor_seconds > 0 && r.winner_seconds > 0) {
      ++with_vendor;
      fast += r.winner_seconds < r.vendor_seconds;
      log_total += std::log(r.vendor_seconds / r.winner_seconds);
    }
  Json summary = Json::object();
  summary.set("problems_with_vendor", with_vendor);
  summary.set("fast_1_vs_vendor", with_vendor ? static_cast<double>(fast) / with_vendor : 0.0);
  summary.set("geomean_speedup_vs_vendor", with_vendor ? std::exp(log_total / with_vendor) : 0.0);
  Json hand_tuned = Json::object();
  int reaching = 0, with_hand_tuned = 0;
  for (const auto& r : results)
    if (!r.hand_tuned_op.empty() && r.winner_passed && r.lathe_seconds > 0) {
      const double fraction = ratio(r.lathe_seconds, r.winner_seconds);
      hand_tuned.set(r.problem, fraction);
      ++with_hand_tuned;
      reaching += fraction >= kHandTunedTarget;
    }
  summary.set("fraction_of_hand_tuned", hand_tuned);
  summary.set("hand_tuned_target", kHandTunedTarget);
  summary.set("problems_reaching_hand_tuned_target", reaching);
  summary.set("problems_with_hand_tuned_kernel", with_hand_tuned);
  json.set("summary", summary);
  return json;
}

std::string format_optimization_table(const std::vector<ProblemOptimization>& results) {
  std::string text;
  char line[512];
  std::snprintf(line, sizeof line, "%-36s %9s %9s %9s %7s %7s %5s %5s %6s  %s\n", "problem", "found ms", "lathe ms",
                "vendor ms", "x lathe", "x vend", "meas", "comp", "search", "winner schedule");
  text += line;
  for (const auto& r : results) {
    std::snprintf(line, sizeof line, "%-36s %9.4f %9.4f %9.4f %6.2fx %6.2fx %5d %5d %5.0fs  %s%s\n", r.problem.c_str(),
                  r.winner_seconds * 1e3, r.lathe_seconds * 1e3, r.vendor_seconds * 1e3,
                  ratio(r.lathe_seconds, r.winner_seconds), ratio(r.vendor_seconds, r.winner_seconds),
                  r.trace.measured(), r.trace.compiled(), r.search_seconds,
                  r.found ? r.winner.key().c_str() : "(none passed)",
                  r.from_cache      ? " (cached)"
                  : r.winner_passed ? ""
                                    : " (FAILED the final lab)");
    text += line;
  }
  text += "x lathe / x vend: that path's median / the found kernel's median (> 1: the found kernel is faster)\n";
  std::string hand_tuned;
  for (const auto& r : results)
    if (!r.hand_tuned_op.empty() && r.winner_passed && r.lathe_seconds > 0)
      hand_tuned += str_cat(hand_tuned.empty() ? "" : ", ", r.problem, " ",
                            two_decimals(ratio(r.lathe_seconds, r.winner_seconds)), "x");
  if (!hand_tuned.empty())
    text += str_cat("against lathe's hand-tuned op kernel (x lathe; target >= ", two_decimals(kHandTunedTarget),
                    "x): ", hand_tuned, "\n");
  return text;
}

std::string optimization_html(const std::vector<ProblemOptimization>& results, const MachinePeaks& peaks,
                              const std::string& cpu) {
  std::string html =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>lathe optimize</title>\n"
      "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}"
      "td:first-child,th:first-child{text-align:left}pre{background:#f4f4f4;padding:8px}</style></head><body>\n";
  html += "<h1>lathe optimize</h1>\n<p>" + html_escape(cpu) +
          str_cat(", ", peaks.threads, " threads; peaks: f32 ", peaks.f32_gflops, " GFLOP/s, DRAM ",
                  peaks.memory_gbytes(0, true), " GB/s (one set for every figure)</p>\n");
  html += "<pre>" + html_escape(format_optimization_table(results)) + "</pre>\n";
  for (const auto& r : results) {
    html += "<h2>" + html_escape(r.problem) + "</h2>\n";
    if (!r.trace.candidates.empty()) html += search_chart(r) + "\n";
    if (r.found) html += "<p>winner: <code>" + html_escape(r.winner.key()) + "</code></p>\n";
  }
  return html + "</body></html>\n";
}

}  // namespace lathe
