#include "lathe/telemetry/goodput_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "lathe/core/clock.h"
#include "lathe/core/error.h"
#include "lathe/telemetry/svg_chart.h"
#include "lathe/telemetry/tensorboard_writer.h"

namespace lathe {

const std::vector<std::string>& goodput_categories() {
  static const std::vector<std::string> categories = {
      "data_loading", "checkpoint_save", "checkpoint_restore", "evaluation", "startup", "progress_lost",
      "productive",   "initialization",  "recovery",           "resize",     "other"};
  return categories;
}

double GoodputReport::seconds(const std::string& category) const {
  for (const auto& [name, value] : seconds_by_category)
    if (name == category) return value;
  return 0;
}

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

struct Labelled {
  double start, end;
  size_t category;  // index into goodput_categories()
};

size_t category_index(const std::string& name) {
  const auto& categories = goodput_categories();
  const auto found = std::find(categories.begin(), categories.end(), name);
  LATHE_ASSERT(found != categories.end());
  return static_cast<size_t>(found - categories.begin());
}

double number_field(const Json& event, const char* key) {
  const Json* value = event.find(key);
  LATHE_CHECK(value && value->is_number(), "goodput event file ", event.get("file").as_string(), ": a \"",
              event.get("kind").as_string(), "\" event without a number \"", key, "\": ", event.dump(0));
  return value->as_number();
}

std::string string_field(const Json& event, const char* key, const std::string& fallback = "") {
  const Json* value = event.find(key);
  return value && value->is_string() ? value->as_string() : fallback;
}

bool is_interval(const std::string& kind) {
  return kind == "initialization" || kind == "startup" || kind == "restore" || kind == "step" || kind == "evaluation" ||
         kind == "checkpoint" || kind == "recovery";
}

}  // namespace

GoodputReport analyze_goodput(const std::vector<Json>& events) {
  GoodputReport report;
  // Which attempt each file belongs to (its "process" event), and each step's latest attempt.
  std::map<std::string, std::string> attempt_of_file;
  std::map<std::string, double> attempt_start;  // attempt -> earliest event
  for (const Json& event : events)
    if (event.get("kind").as_string() == "process" && event.find("attempt"))
      attempt_of_file[event.get("file").as_string()] = string_field(event, "attempt");
  auto attempt_of = [&](const Json& event) {
    const std::string& file = event.get("file").as_string();
    const auto found = attempt_of_file.find(file);
    return found == attempt_of_file.end() ? file : found->second;
  };

  double start = std::numeric_limits<double>::infinity(), end = -start;
  std::map<int64_t, std::pair<double, std::string>> latest_execution;  // step -> (start, attempt)
  std::map<std::string, double> attempt_last_end;                      // attempt -> last recorded moment
  std::map<std::string, std::vector<double>> step_seconds_of_file;
  for (const Json& event : events) {
    const std::string& kind = event.get("kind").as_string();
    const std::string& file = event.get("file").as_string();
    const double first = is_interval(kind) ? number_field(event, "start") : number_field(event, "time");
    const double last = is_interval(kind) ? number_field(event, "end") : first;
    start = std::min(start, first);
    end = std::max(end, last);
    if (file.rfind("launcher", 0) == 0) continue;
    const std::string attempt = attempt_of(event);
    attempt_last_end[attempt] = std::max(attempt_last_end.count(attempt) ? attempt_last_end[attempt] : last, last);
    if (!attempt_start.count(attempt) || first < attempt_start[attempt]) attempt_start[attempt] = first;
    if (kind == "step") {
      const int64_t step = static_cast<int64_t>(number_field(event, "step"));
      auto [found, inserted] = latest_execution.try_emplace(step, first, attempt);
      if (!inserted && first > found->second.first && attempt != found->second.second) found->second = {first, attempt};
      step_seconds_of_file[file].push_back(last - first);
    }
  }
  if (events.empty()) {
    start = end = 0;
  }
  report.start = start;
  report.end = end;
  report.total_seconds = std::max(0.0, end - start);
  report.attempts = static_cast<int64_t>(attempt_start.size());
  for (const auto& [attempt, first] : attempt_start)
    report.timeline.push_back({attempt, first, attempt_last_end[attempt], 0, "ended"});
  std::sort(report.timeline.begin(), report.timeline.end(),
            [](const GoodputAttempt& a, const GoodputAttempt& b) { return a.start < b.start; });
  std::map<std::string, GoodputAttempt*> timeline_of;
  for (GoodputAttempt& entry : report.timeline) timeline_of[entry.attempt] = &entry;
  auto timeline_entry = [&](const std::string& attempt) -> GoodputAttempt* {
    const auto found = timeline_of.find(attempt);
    return found == timeline_of.end() ? nullptr : found->second;
  };
  for (const Json& event : events) {
    const std::string& kind = event.get("kind").as_string();
    GoodputAttempt* entry =
        timeline_entry(kind == "failure" || kind == "resize" ? string_field(event, "attempt") : attempt_of(event));
    if (!entry) continue;
    if (kind == "process" && event.find("world"))
      entry->world = std::max(entry->world, static_cast<int64_t>(number_field(event, "world")));
    if (kind == "job_end") {
      const Json* interrupted = event.find("interrupted");
      entry->outcome = interrupted && interrupted->kind() == Json::Kind::boolean && interrupted->as_bool()
                           ? "interrupted"
                           : "finished";
    }
    if (kind == "failure") entry->outcome = "failed: " + string_field(event, "reason");
    if (kind == "resize") entry->outcome = "resized";
    if (kind == "failure" || kind == "resize") entry->end = std::max(entry->end, number_field(event, "time"));
  }

  std::vector<Labelled> intervals;
  std::map<std::string, bool> file_saw_first_step;
  // Productive steps per (attempt, step): ranks of one attempt count once.
  std::set<std::pair<std::string, int64_t>> productive_executions, lost_executions;
  struct ProductiveStep {
    double start, end;
    std::string attempt;
  };
  std::vector<ProductiveStep> productive_steps;  // for MTTR
  for (const Json& event : events) {
    const std::string& kind = event.get("kind").as_string();
    if (!is_interval(kind)) continue;
    const std::string& file = event.get("file").as_string();
    const double first = number_field(event, "start"), last = number_field(event, "end");
    if (kind == "initialization") intervals.push_back({first, last, category_index("initialization")});
    if (kind == "startup") intervals.push_back({first, last, category_index("startup")});
    if (kind == "restore") intervals.push_back({first, last, category_index("checkpoint_restore")});
    if (kind == "evaluation") intervals.push_back({first, last, category_index("evaluation")});
    if (kind == "checkpoint") intervals.push_back({first, last, category_index("checkpoint_save")});
    if (kind == "recovery")
      intervals.push_back(
          {first, last, category_index(string_field(event, "cause") == "resize" ? "resize" : "recovery")});
    if (kind != "step") continue;
    const std::string attempt = attempt_of(event);
    const int64_t step = static_cast<int64_t>(number_field(event, "step"));
    const auto& latest = latest_execution.at(step);
    const bool lost = latest.second != attempt;
    if (lost) {
      lost_executions.insert({attempt, step});
      intervals.push_back({first, last, category_index("progress_lost")});
      continue;
    }
    productive_executions.insert({attempt, step});
    productive_steps.push_back({first, last, attempt});
    intervals.push_back({first, last, category_index("productive")});
    const Json* data = event.find("data_seconds");
    if (data && data->is_number() && data->as_number() > 0)
      intervals.push_back({first, std::min(last, first + data->as_number()), category_index("data_loading")});
    if (!file_saw_first_step[file]) {
      file_saw_first_step[file] = true;
      const double excess = (last - first) - median(step_seconds_of_file[file]);
      if (excess > 0) intervals.push_back({first, first + excess, category_index("startup")});
    }
  }
  report.productive_steps = static_cast<int64_t>(productive_executions.size());
  report.lost_steps = static_cast<int64_t>(lost_executions.size());

  for (const Json& event : events) {
    const std::string& kind = event.get("kind").as_string();
    if (kind != "failure" && kind != "resize") continue;
    GoodputDisruption disruption;
    disruption.kind = kind;
    disruption.reason = string_field(event, "reason");
    disruption.time = number_field(event, "time");
    disruption.detected = event.find("detected") ? number_field(event, "detected") : disruption.time;
    // Recovered by a later attempt: the stopped group's other ranks (or a hung rank that recorded
    // a step but not its heartbeat) may still log steps after a hang's failure time.
    const std::string attempt = string_field(event, "attempt");
    double recovered = std::numeric_limits<double>::infinity();
    for (const ProductiveStep& step : productive_steps)
      if (step.start >= disruption.time && step.attempt != attempt) recovered = std::min(recovered, step.end);
    disruption.recovered = std::isfinite(recovered) ? recovered : 0;
    report.disruptions.push_back(disruption);
    // The failed attempt's unrecorded tail: work cut short by the failure.
    if (kind == "failure" && attempt_last_end.count(attempt) && attempt_last_end[attempt] < disruption.time)
      intervals.push_back({attempt_last_end[attempt], disruption.time, category_index("progress_lost")});
  }

  // Sweep over interval boundaries, counting the open intervals of each category: every segment
  // between two boundaries takes the strongest open category.
  const auto& categories = goodput_categories();
  std::vector<double> seconds(categories.size(), 0.0);
  std::vector<std::pair<double, int>> edges;  // (time, +-(category + 1))
  for (const Labelled& interval : intervals) {
    const double from = std::clamp(interval.start, start, end), to = std::clamp(interval.end, start, end);
    if (to <= from) continue;
    edges.push_back({from, static_cast<int>(interval.category) + 1});
    edges.push_back({to, -static_cast<int>(interval.category) - 1});
  }
  edges.push_back({end, 0});
  std::sort(edges.begin(), edges.end());
  std::vector<int> open(categories.size(), 0);
  double previous = start;
  for (const auto& [time, change] : edges) {
    size_t strongest = category_index("other");
    for (size_t c = 0; c < categories.size(); ++c)
      if (open[c] > 0) {
        strongest = c;
        break;
      }
    seconds[strongest] += time - previous;
    previous = time;
    if (change > 0) ++open[static_cast<size_t>(change - 1)];
    if (change < 0) --open[static_cast<size_t>(-change - 1)];
  }
  for (size_t i = 0; i < categories.size(); ++i) report.seconds_by_category.push_back({categories[i], seconds[i]});
  report.goodput_fraction = report.total_seconds > 0 ? report.seconds("productive") / report.total_seconds : 0;

  // A planned resize interrupts nothing unexpectedly: MTTI and MTTR are about failures.
  const auto failures =
      static_cast<size_t>(std::count_if(report.disruptions.begin(), report.disruptions.end(),
                                        [](const GoodputDisruption& d) { return d.kind == "failure"; }));
  report.mtti_seconds = failures == 0 ? kNan : report.total_seconds / static_cast<double>(failures);
  double repair = 0, after_detection = 0;
  int recovered = 0;
  for (const GoodputDisruption& disruption : report.disruptions)
    if (disruption.kind == "failure" && disruption.recovered > 0) {
      repair += disruption.recovered - disruption.time;
      after_detection += disruption.recovered - disruption.detected;
      ++recovered;
    }
  report.mttr_seconds = recovered ? repair / recovered : kNan;
  report.mttr_after_detection_seconds = recovered ? after_detection / recovered : kNan;
  return report;
}

namespace {

std::string seconds_text(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f s", seconds);
  return buffer;
}

Json number_or_null(double value) { return std::isfinite(value) ? Json(value) : Json(); }

}  // namespace

std::string format_goodput_table(const GoodputReport& report) {
  std::string text;
  char line[160];
  const double total = report.total_seconds > 0 ? report.total_seconds : 1;
  std::snprintf(line, sizeof line, "total time   %12s  (%lld attempt(s), %lld productive steps, %lld redone)\n",
                seconds_text(report.total_seconds).c_str(), static_cast<long long>(report.attempts),
                static_cast<long long>(report.productive_steps), static_cast<long long>(report.lost_steps));
  text += line;
  std::snprintf(line, sizeof line, "goodput      %12s  %6.2f%%\n", seconds_text(report.seconds("productive")).c_str(),
                100.0 * report.goodput_fraction);
  text += line;
  text += "badput:\n";
  for (const auto& [category, seconds] : report.seconds_by_category) {
    if (category == "productive") continue;
    std::snprintf(line, sizeof line, "  %-20s %10s  %6.2f%%\n", category.c_str(), seconds_text(seconds).c_str(),
                  100.0 * seconds / total);
    text += line;
  }
  std::snprintf(line, sizeof line, "disruptions  %zu\n", report.disruptions.size());
  text += line;
  for (const GoodputDisruption& disruption : report.disruptions) {
    std::snprintf(line, sizeof line, "  %-8s at +%.3f s: %s; recovered %s\n",
                  disruption.kind == "resize" ? "resize (planned)" : disruption.kind.c_str(),
                  disruption.time - report.start, disruption.reason.c_str(),
                  disruption.recovered > 0
                      ? str_cat("after ", seconds_text(disruption.recovered - disruption.time)).c_str()
                      : "never");
    text += line;
  }
  std::snprintf(line, sizeof line, "MTTI         %12s\nMTTR         %12s  (%s after detection)\n",
                seconds_text(report.mtti_seconds).c_str(), seconds_text(report.mttr_seconds).c_str(),
                seconds_text(report.mttr_after_detection_seconds).c_str());
  text += line;
  return text;
}

Json goodput_report_to_json(const GoodputReport& report) {
  Json json = Json::object();
  char unix_time[32];
  std::snprintf(unix_time, sizeof unix_time, "%.6f", report.start);
  json.set("start_unix_seconds", std::string(unix_time));  // a string: a JSON number here keeps 9 digits
  json.set("total_seconds", report.total_seconds);
  json.set("goodput_percent", 100.0 * report.goodput_fraction);
  Json seconds = Json::object(), percent = Json::object();
  for (const auto& [category, value] : report.seconds_by_category) {
    seconds.set(category, value);
    percent.set(category, report.total_seconds > 0 ? 100.0 * value / report.total_seconds : 0.0);
  }
  json.set("seconds", seconds);
  json.set("percent", percent);
  json.set("productive_steps", report.productive_steps);
  json.set("lost_steps", report.lost_steps);
  json.set("attempts", report.attempts);
  Json disruptions = Json::array();
  for (const GoodputDisruption& disruption : report.disruptions) {
    Json row = Json::object();
    row.set("kind", disruption.kind);
    row.set("planned", disruption.kind == "resize");
    row.set("reason", disruption.reason);
    // Seconds since start_unix_seconds: a JSON number keeps 9 significant digits, which for a Unix
    // time is 10 s; relative times keep milliseconds for runs of up to a few days.
    row.set("time", disruption.time - report.start);
    row.set("detected", disruption.detected - report.start);
    row.set("recovered", disruption.recovered > 0 ? Json(disruption.recovered - report.start) : Json());
    disruptions.push(row);
  }
  json.set("disruptions", disruptions);
  Json timeline = Json::array();
  for (const GoodputAttempt& attempt : report.timeline) {
    Json row = Json::object();
    row.set("attempt", attempt.attempt);
    row.set("start", attempt.start - report.start);
    row.set("end", attempt.end - report.start);
    row.set("world", attempt.world);
    row.set("outcome", attempt.outcome);
    timeline.push(row);
  }
  json.set("timeline", timeline);
  json.set("mtti_seconds", number_or_null(report.mtti_seconds));
  json.set("mttr_seconds", number_or_null(report.mttr_seconds));
  json.set("mttr_after_detection_seconds", number_or_null(report.mttr_after_detection_seconds));
  return json;
}

std::string goodput_report_svg(const GoodputReport& report, const std::string& title) {
  std::vector<PercentBar> bars;
  for (const auto& [category, seconds] : report.seconds_by_category) {
    PercentBar bar;
    bar.label = category;
    bar.percent = report.total_seconds > 0 ? 100.0 * seconds / report.total_seconds : 0;
    bar.colour = category == "productive" ? "#3a9a4a" : category == "other" ? "#999999" : "#d8553b";
    bar.right = seconds_text(seconds);
    bars.push_back(bar);
  }
  const std::string legend =
      str_cat("share of ", seconds_text(report.total_seconds), " wall-clock (green: goodput, red: badput); ",
              report.disruptions.size(), " disruption(s), MTTR ", seconds_text(report.mttr_seconds));
  BarChartLayout layout;
  layout.label_width = 170;
  layout.right_width = 140;
  const std::string breakdown = percent_bar_chart_svg(bars, title, legend, layout);
  if (report.timeline.empty()) return breakdown;

  // The timeline: attempt i is a thick bar at y = i over its seconds since the job's start;
  // failures are marked where they happened, on their attempt's row.
  LineChart timeline;
  timeline.title = "attempts over time";
  timeline.subtitle = "one row per start of the worker group: world size and how it ended; circles: failures";
  timeline.x_label = "seconds since the job started";
  timeline.y_label = "attempt";
  const double span = std::max(report.total_seconds, 1e-3);
  timeline.x_axis = choose_axis(0, span, false);
  timeline.y_axis = choose_axis(0, static_cast<double>(report.timeline.size()) + 1, false, 1);
  for (size_t index = 0; index < report.timeline.size(); ++index) {
    const GoodputAttempt& attempt = report.timeline[index];
    const double row = static_cast<double>(index) + 1;
    const bool failed = attempt.outcome.rfind("failed", 0) == 0;
    const char* colour = failed ? "#d8553b" : attempt.outcome == "resized" ? "#e69f00" : "#3a9a4a";
    timeline.series.push_back({str_cat("#", index + 1, " world ", attempt.world, ": ", attempt.outcome),
                               colour,
                               1,
                               8,
                               PointMarkers::if_single,
                               {attempt.start - report.start, std::max(attempt.end, attempt.start) - report.start},
                               {row, row}});
  }
  for (const GoodputDisruption& disruption : report.disruptions) {
    if (disruption.kind != "failure") continue;
    // The row of the attempt running at the failure: the last one started before it.
    size_t row = 0;
    for (size_t index = 0; index < report.timeline.size(); ++index)
      if (report.timeline[index].start <= disruption.time) row = index + 1;
    timeline.series.push_back({"",
                               "#000000",
                               1,
                               1,
                               PointMarkers::all,
                               {disruption.time - report.start},
                               {static_cast<double>(std::max<size_t>(row, 1))}});
  }
  return stack_svgs_vertically({breakdown, line_chart_svg(timeline)});
}

void write_goodput_tensorboard(const GoodputReport& report, const std::string& log_dir) {
  TensorBoardWriter writer(log_dir);
  const int64_t step = report.productive_steps;
  writer.add_scalar("goodput/percent", 100.0 * report.goodput_fraction, step);
  writer.add_scalar("goodput/total_seconds", report.total_seconds, step);
  for (const auto& [category, seconds] : report.seconds_by_category)
    writer.add_scalar("goodput/" + category + "_seconds", seconds, step);
  writer.add_scalar("goodput/disruptions", static_cast<double>(report.disruptions.size()), step);
  if (std::isfinite(report.mtti_seconds)) writer.add_scalar("goodput/mtti_seconds", report.mtti_seconds, step);
  if (std::isfinite(report.mttr_seconds)) writer.add_scalar("goodput/mttr_seconds", report.mttr_seconds, step);
  writer.close();
}

}  // namespace lathe
