#include "lathe/telemetry/loss_curve_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lathe/core/error.h"

namespace lathe {
namespace {

constexpr const char* kTrainColour = "#3b7dd8";
constexpr const char* kValidationColour = "#e8912d";

template <class... Args>
std::string format(const char* pattern, Args... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, pattern, args...);
  return buffer;
}

std::string format_loss(double loss) { return std::fabs(loss) >= 1e5 ? format("%.4g", loss) : format("%.3f", loss); }

struct Series {
  std::vector<double> steps, losses;
};

// Finite points in step order; counts what was skipped.
Series finite_points(const std::vector<LossPoint>& points, int64_t& skipped) {
  std::vector<LossPoint> sorted;
  for (const auto& point : points) {
    if (std::isfinite(point.loss))
      sorted.push_back(point);
    else
      ++skipped;
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const LossPoint& a, const LossPoint& b) { return a.step < b.step; });
  Series series;
  for (const auto& point : sorted) {
    series.steps.push_back(static_cast<double>(point.step));
    series.losses.push_back(point.loss);
  }
  return series;
}

}  // namespace

std::vector<double> exponential_moving_average(const std::vector<double>& values, double weight) {
  std::vector<double> smoothed;
  double average = 0, total_weight = 0;
  for (double value : values) {
    average = weight * average + (1 - weight) * value;
    total_weight = weight * total_weight + (1 - weight);
    smoothed.push_back(average / total_weight);
  }
  return smoothed;
}

std::string loss_curve_svg(const std::vector<LossPoint>& train, const std::vector<LossPoint>& validation,
                           const std::string& title) {
  int64_t skipped = 0;
  Series train_series = finite_points(train, skipped);
  Series validation_series = finite_points(validation, skipped);
  std::vector<double> all_steps = train_series.steps, all_losses = train_series.losses;
  all_steps.insert(all_steps.end(), validation_series.steps.begin(), validation_series.steps.end());
  all_losses.insert(all_losses.end(), validation_series.losses.begin(), validation_series.losses.end());
  LineChart chart;
  chart.title = title;
  chart.x_label = "step";
  chart.y_label = "loss";
  chart.empty_message = "no finite loss values yet";
  if (all_steps.empty()) {
    chart.x_axis = choose_axis(0, 1, false);
    chart.y_axis = choose_axis(0, 1, false);
  } else {
    auto [step_min, step_max] = std::minmax_element(all_steps.begin(), all_steps.end());
    auto [loss_min, loss_max] = std::minmax_element(all_losses.begin(), all_losses.end());
    // Steps are integers: a lone step gets a range of +-1 rather than fractional ticks.
    double low = *step_min, high = *step_max;
    if (low == high) low -= 1, high += 1;
    chart.x_axis = choose_axis(low, high, false, 1);
    chart.y_axis = choose_axis(*loss_min, *loss_max, true);
  }
  // Smooth over roughly a tenth of the run, at most ~20 points of memory: few points, little
  // smoothing. On a log axis smooth the logarithms, so one spike does not dominate for long.
  double weight =
      std::clamp(1.0 - 10.0 / static_cast<double>(std::max<size_t>(train_series.losses.size(), 1)), 0.0, 0.95);
  std::vector<double> smoothed = train_series.losses;
  if (chart.y_axis.logarithmic)
    for (double& loss : smoothed) loss = std::log(loss);
  smoothed = exponential_moving_average(smoothed, weight);
  if (chart.y_axis.logarithmic)
    for (double& loss : smoothed) loss = std::exp(loss);

  if (!train_series.losses.empty())
    chart.subtitle +=
        format("train loss %s (smoothed %s) at step %.0f", format_loss(train_series.losses.back()).c_str(),
               format_loss(smoothed.back()).c_str(), train_series.steps.back());
  if (!validation_series.losses.empty()) {
    size_t best = std::min_element(validation_series.losses.begin(), validation_series.losses.end()) -
                  validation_series.losses.begin();
    chart.subtitle += format("%sbest validation %s at step %.0f", chart.subtitle.empty() ? "" : "  |  ",
                             format_loss(validation_series.losses[best]).c_str(), validation_series.steps[best]);
  }
  if (skipped > 0)
    chart.subtitle += format("%s%lld non-finite losses skipped", chart.subtitle.empty() ? "" : "  |  ",
                             static_cast<long long>(skipped));

  chart.series.push_back(
      {"train (raw)", kTrainColour, 0.3, 1, PointMarkers::if_single, train_series.steps, train_series.losses});
  chart.series.push_back(
      {"train (moving average)", kTrainColour, 1, 2, PointMarkers::none, train_series.steps, smoothed});
  chart.series.push_back(
      {"validation", kValidationColour, 1, 2, PointMarkers::all, validation_series.steps, validation_series.losses});
  return line_chart_svg(chart);
}

void write_loss_curve_svg(const std::string& path, const std::vector<LossPoint>& train,
                          const std::vector<LossPoint>& validation, const std::string& title) {
  std::string svg = loss_curve_svg(train, validation, title);
  std::filesystem::path target(path);
  std::error_code error;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), error);
  LATHE_CHECK(!error, "cannot create the directory of loss curve ", path, ": ", error.message());
  std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    LATHE_CHECK(file.good(), "cannot write loss curve ", temporary);
    file << svg;
    file.flush();
    LATHE_CHECK(file.good(), "failed writing loss curve ", temporary);
  }
  std::filesystem::rename(temporary, target, error);
  if (error) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
  }
  LATHE_CHECK(!error, "cannot move ", temporary, " to ", path, ": ", error.message());
}

}  // namespace lathe
