#include "lathe/telemetry/run_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "lathe/core/error.h"
#include "lathe/telemetry/loss_curve_svg.h"
#include "lathe/telemetry/svg_chart.h"

namespace lathe {
namespace {

// Colour-blind-safe palette (Okabe-Ito), cycled per run.
constexpr const char* kRunColours[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"};
constexpr const char* kRestartColour = "#888888";

const char* run_colour(size_t index) { return kRunColours[index % (sizeof kRunColours / sizeof kRunColours[0])]; }

const Json* number_member(const Json& row, const char* key) {
  const Json* value = row.find(key);
  return value && value->is_number() ? value : nullptr;
}

struct Extent {
  double low = INFINITY, high = -INFINITY;
  void add(const std::vector<double>& values) {
    for (double value : values)
      if (std::isfinite(value)) low = std::min(low, value), high = std::max(high, value);
  }
  bool empty() const { return low > high; }
};

ChartAxis axis_over(Extent extent, bool allow_logarithmic, double minimum_step = 0) {
  if (extent.empty()) return choose_axis(0, 1, false);
  if (extent.low == extent.high) extent.low -= 1, extent.high += 1;
  return choose_axis(extent.low, extent.high, allow_logarithmic, minimum_step);
}

std::vector<double> scaled(const std::vector<double>& steps, double factor) {
  std::vector<double> result = steps;
  for (double& value : result) value *= factor;
  return result;
}

// Finite (x, y) pairs only: the chart takes finite values.
LineSeries finite_series(LineSeries series) {
  LineSeries kept = series;
  kept.x.clear(), kept.y.clear();
  for (size_t i = 0; i < series.x.size(); ++i)
    if (std::isfinite(series.x[i]) && std::isfinite(series.y[i]))
      kept.x.push_back(series.x[i]), kept.y.push_back(series.y[i]);
  return kept;
}

}  // namespace

RunCurves run_curves_from_metrics(const std::vector<Json>& rows, const std::string& label) {
  RunCurves curves;
  curves.label = label;
  std::map<int64_t, double> loss, lr, validation;
  double previous_step = -INFINITY, previous_elapsed = -INFINITY;
  for (const Json& row : rows) {
    const Json* step_value = number_member(row, "step");
    if (!step_value) continue;
    const double step = step_value->as_number();
    const int64_t key = static_cast<int64_t>(step);
    if (const Json* value = number_member(row, "loss")) {
      const Json* elapsed = number_member(row, "elapsed_seconds");
      const double seconds = elapsed ? elapsed->as_number() : previous_elapsed;
      if (std::isfinite(previous_step) && (step <= previous_step || seconds < previous_elapsed))
        curves.restart_steps.push_back(step);
      previous_step = step, previous_elapsed = seconds;
      loss[key] = value->as_number();
      if (const Json* rate = number_member(row, "lr")) lr[key] = rate->as_number();
    }
    if (const Json* value = number_member(row, "val_loss")) validation[key] = value->as_number();
  }
  for (const auto& [step, value] : loss)
    curves.steps.push_back(static_cast<double>(step)), curves.losses.push_back(value);
  for (const auto& [step, value] : lr)
    curves.lr_steps.push_back(static_cast<double>(step)), curves.lrs.push_back(value);
  for (const auto& [step, value] : validation)
    curves.validation_steps.push_back(static_cast<double>(step)), curves.validation_losses.push_back(value);
  return curves;
}

std::string run_plot_svg(const std::vector<RunCurves>& runs, const RunPlotOptions& options) {
  for (const RunCurves& run : runs)
    LATHE_CHECK(!options.x_tokens || run.tokens_per_step > 0, "--x tokens: the tokens per step of run ", run.label,
                " are unknown (its config.yaml is missing)");
  const auto x_of = [&](const RunCurves& run, const std::vector<double>& steps) {
    return options.x_tokens ? scaled(steps, run.tokens_per_step) : steps;
  };
  LineChart losses, rates;
  losses.title = options.title;
  losses.x_label = rates.x_label = options.x_tokens ? "tokens" : "step";
  losses.y_label = "loss";
  rates.title = "learning rate";
  rates.y_label = "lr";
  losses.empty_message = "no losses logged yet";
  rates.empty_message = "no learning rates logged yet";
  Extent x_extent, loss_extent, lr_extent;
  for (const RunCurves& run : runs) {
    x_extent.add(x_of(run, run.steps));
    x_extent.add(x_of(run, run.validation_steps));
    loss_extent.add(run.losses);
    loss_extent.add(run.validation_losses);
    lr_extent.add(run.lrs);
  }
  losses.x_axis = rates.x_axis = axis_over(x_extent, false, options.x_tokens ? 0 : 1);
  losses.y_axis = axis_over(loss_extent, true);
  if (options.log_loss) {
    LATHE_CHECK(loss_extent.empty() || loss_extent.low > 0, "--log: a logarithmic loss axis needs positive losses, ",
                "found ", loss_extent.low);
    if (!loss_extent.empty()) losses.y_axis = logarithmic_axis(loss_extent.low, loss_extent.high);
  }
  rates.y_axis = axis_over(lr_extent, false);

  std::string subtitle;
  for (size_t index = 0; index < runs.size(); ++index) {
    const RunCurves& run = runs[index];
    const char* colour = run_colour(index);
    const double weight =
        std::clamp(1.0 - 10.0 / static_cast<double>(std::max<size_t>(run.losses.size(), 1)), 0.0, 0.95);
    const std::vector<double> x = x_of(run, run.steps);
    losses.series.push_back(finite_series({"", colour, 0.25, 1, PointMarkers::if_single, x, run.losses}));
    losses.series.push_back(finite_series(
        {run.label, colour, 1, 2, PointMarkers::none, x, exponential_moving_average(run.losses, weight)}));
    losses.series.push_back(
        finite_series({run.validation_steps.empty() ? "" : run.label + " (validation)", colour, 1, 1, PointMarkers::all,
                       x_of(run, run.validation_steps), run.validation_losses}));
    rates.series.push_back(
        finite_series({run.label, colour, 1, 2, PointMarkers::if_single, x_of(run, run.lr_steps), run.lrs}));
    // A restart: a thin vertical line over the whole loss range.
    for (double step : run.restart_steps) {
      const double at = options.x_tokens ? step * run.tokens_per_step : step;
      losses.series.push_back(
          {"", kRestartColour, 0.8, 1, PointMarkers::none, {at, at}, {losses.y_axis.low, losses.y_axis.high}});
    }
    char line[256];
    std::snprintf(line, sizeof line, "%s%s: %zu steps, %zu restart(s)", subtitle.empty() ? "" : "  |  ",
                  run.label.c_str(), run.steps.size(), run.restart_steps.size());
    subtitle += line;
  }
  losses.subtitle = subtitle + (subtitle.empty() ? "" : "  |  ") + "grey lines: restarts";
  return stack_svgs_vertically({line_chart_svg(losses), line_chart_svg(rates)});
}

}  // namespace lathe
