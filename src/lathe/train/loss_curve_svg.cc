#include "lathe/train/loss_curve_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lathe/core/error.h"
#include "lathe/core/xml_escape.h"

namespace lathe {
namespace {

// Chart geometry in SVG user units (pixels at 100% zoom).
constexpr double kWidth = 860, kHeight = 500;
constexpr double kLeft = 80, kRight = 30, kTop = 66, kBottom = 56;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;
constexpr const char* kTrainColour = "#3b7dd8";
constexpr const char* kValidationColour = "#e8912d";

template <class... Args>
std::string format(const char* pattern, Args... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, pattern, args...);
  return buffer;
}

// 1, 2 or 5 times a power of ten, at least `rough`.
double nice_step(double rough) {
  double power = std::pow(10.0, std::floor(std::log10(rough)));
  double fraction = rough / power;
  return power * (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10);
}

std::string format_tick(double value, const ChartAxis& axis) {
  if (axis.logarithmic) return format("%g", value);
  double step = axis.ticks.size() > 1 ? axis.ticks[1] - axis.ticks[0] : 1;
  if (std::fabs(value) < step * 1e-6) value = 0;  // no "-0" or "1e-17" from accumulated rounding
  double magnitude = std::fabs(value);
  if (magnitude >= 1e6 || (magnitude > 0 && magnitude < 1e-4)) return format("%.3g", value);
  int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return format("%.*f", decimals, value);
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

struct Chart {
  ChartAxis x, y;
  double map_x(double step) const { return kLeft + (step - x.low) / (x.high - x.low) * kPlotWidth; }
  double map_y(double loss) const {
    double fraction = y.logarithmic ? (std::log10(loss) - std::log10(y.low)) / (std::log10(y.high) - std::log10(y.low))
                                    : (loss - y.low) / (y.high - y.low);
    return kTop + kPlotHeight * (1 - fraction);
  }
};

// Polyline points, reduced to first/min/max/last per pixel column: thousands of points per pixel
// would bloat the file without changing the picture, but spikes must stay visible.
std::string polyline_points(const Chart& chart, const std::vector<double>& steps, const std::vector<double>& losses) {
  std::string out;
  auto emit = [&](size_t i) { out += format("%.1f,%.1f ", chart.map_x(steps[i]), chart.map_y(losses[i])); };
  size_t begin = 0;
  while (begin < steps.size()) {
    auto column = static_cast<int64_t>(std::floor(chart.map_x(steps[begin])));
    size_t end = begin, lowest = begin, highest = begin;
    while (end < steps.size() && static_cast<int64_t>(std::floor(chart.map_x(steps[end]))) == column) {
      if (losses[end] < losses[lowest]) lowest = end;
      if (losses[end] > losses[highest]) highest = end;
      ++end;
    }
    std::vector<size_t> keep = {begin, lowest, highest, end - 1};
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (size_t i : keep) emit(i);
    begin = end;
  }
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace

ChartAxis choose_axis(double data_min, double data_max, bool allow_logarithmic, double minimum_step) {
  LATHE_ASSERT(std::isfinite(data_min) && std::isfinite(data_max) && data_min <= data_max);
  ChartAxis axis;
  if (allow_logarithmic && data_min > 0 && data_max / data_min > 100) {
    axis.logarithmic = true;
    int low_exponent = static_cast<int>(std::floor(std::log10(data_min)));
    int high_exponent = static_cast<int>(std::ceil(std::log10(data_max)));
    axis.low = std::pow(10.0, low_exponent);
    axis.high = std::pow(10.0, high_exponent);
    for (int exponent = low_exponent; exponent <= high_exponent; ++exponent) {
      double decade = std::pow(10.0, exponent);
      axis.ticks.push_back(decade);
      if (high_exponent - low_exponent <= 3 && exponent < high_exponent) {
        axis.ticks.push_back(2 * decade);
        axis.ticks.push_back(5 * decade);
      }
    }
    return axis;
  }
  // One value, or a spread too small to label at this magnitude: centre it in a small range.
  double magnitude = std::max(std::fabs(data_min), std::fabs(data_max));
  if (data_max - data_min <= magnitude * 1e-9) {
    double centre = data_min / 2 + data_max / 2, pad = magnitude == 0 ? 1 : magnitude * 0.1;
    data_min = centre - pad;
    data_max = centre + pad;
  }
  // Divide before subtracting: data_max - data_min may overflow for huge ranges.
  double step = std::max(nice_step(data_max / 6 - data_min / 6), minimum_step);
  axis.low = std::floor(data_min / step) * step;
  axis.high = std::ceil(data_max / step) * step;
  // At large magnitudes with a tiny spread, the rounded product can land just inside the data.
  if (axis.low > data_min) axis.low -= step;
  if (axis.high < data_max) axis.high += step;
  auto intervals = static_cast<int64_t>(std::llround(axis.high / step - axis.low / step));
  for (int64_t i = 0; i <= intervals; ++i) axis.ticks.push_back(axis.low + static_cast<double>(i) * step);
  return axis;
}

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
  bool empty = all_steps.empty();
  Chart chart;
  if (empty) {
    chart.x = choose_axis(0, 1, false);
    chart.y = choose_axis(0, 1, false);
  } else {
    auto [step_min, step_max] = std::minmax_element(all_steps.begin(), all_steps.end());
    auto [loss_min, loss_max] = std::minmax_element(all_losses.begin(), all_losses.end());
    // Steps are integers: a lone step gets a range of +-1 rather than fractional ticks.
    double low = *step_min, high = *step_max;
    if (low == high) low -= 1, high += 1;
    chart.x = choose_axis(low, high, false, 1);
    chart.y = choose_axis(*loss_min, *loss_max, true);
  }
  // Smooth over roughly a tenth of the run, at most ~20 points of memory: few points, little
  // smoothing. On a log axis smooth the logarithms, so one spike does not dominate for long.
  double weight =
      std::clamp(1.0 - 10.0 / static_cast<double>(std::max<size_t>(train_series.losses.size(), 1)), 0.0, 0.95);
  std::vector<double> smoothed = train_series.losses;
  if (chart.y.logarithmic)
    for (double& loss : smoothed) loss = std::log(loss);
  smoothed = exponential_moving_average(smoothed, weight);
  if (chart.y.logarithmic)
    for (double& loss : smoothed) loss = std::exp(loss);

  std::string svg = format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, kHeight, kWidth, kHeight);
  svg += format("<text x=\"%.0f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">", kLeft) + escape_xml(title) +
         "</text>\n";

  std::string subtitle;
  if (!train_series.losses.empty())
    subtitle += format("train loss %s (smoothed %s) at step %.0f", format_loss(train_series.losses.back()).c_str(),
                       format_loss(smoothed.back()).c_str(), train_series.steps.back());
  if (!validation_series.losses.empty()) {
    size_t best = std::min_element(validation_series.losses.begin(), validation_series.losses.end()) -
                  validation_series.losses.begin();
    subtitle += format("%sbest validation %s at step %.0f", subtitle.empty() ? "" : "  |  ",
                       format_loss(validation_series.losses[best]).c_str(), validation_series.steps[best]);
  }
  if (skipped > 0)
    subtitle +=
        format("%s%lld non-finite losses skipped", subtitle.empty() ? "" : "  |  ", static_cast<long long>(skipped));
  svg += format("<text x=\"%.0f\" y=\"46\" fill=\"#555\">", kLeft) + escape_xml(subtitle) + "</text>\n";

  // Gridlines and tick labels.
  for (double tick : chart.y.ticks) {
    double y = chart.map_y(tick);
    svg += format("<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", kLeft, y,
                  kLeft + kPlotWidth, y);
    svg += format("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">", kLeft - 6, y + 4) +
           format_tick(tick, chart.y) + "</text>\n";
  }
  for (double tick : chart.x.ticks) {
    double x = chart.map_x(tick);
    svg += format("<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#e4e4e4\"/>", x, kTop, x,
                  kTop + kPlotHeight);
    svg += format("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#555\">", x, kTop + kPlotHeight + 18) +
           format_tick(tick, chart.x) + "</text>\n";
  }
  svg += format("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#888\"/>\n", kLeft,
                kTop, kPlotWidth, kPlotHeight);
  svg +=
      format("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n", kLeft + kPlotWidth / 2, kHeight - 12);
  svg += format("<text transform=\"translate(18 %.0f) rotate(-90)\" text-anchor=\"middle\">loss%s</text>\n",
                kTop + kPlotHeight / 2, chart.y.logarithmic ? " (log scale)" : "");

  if (empty) {
    svg += format("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#888\">no finite loss values yet</text>\n",
                  kLeft + kPlotWidth / 2, kTop + kPlotHeight / 2);
  }
  if (!train_series.losses.empty()) {
    svg += format("<polyline fill=\"none\" stroke=\"%s\" stroke-opacity=\"0.3\" stroke-width=\"1\" points=\"",
                  kTrainColour) +
           polyline_points(chart, train_series.steps, train_series.losses) + "\"/>\n";
    svg += format("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", kTrainColour) +
           polyline_points(chart, train_series.steps, smoothed) + "\"/>\n";
    if (train_series.losses.size() == 1)  // a one-point polyline is invisible
      svg += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", chart.map_x(train_series.steps[0]),
                    chart.map_y(train_series.losses[0]), kTrainColour);
  }
  if (!validation_series.losses.empty()) {
    svg += format("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", kValidationColour) +
           polyline_points(chart, validation_series.steps, validation_series.losses) + "\"/>\n";
    if (validation_series.losses.size() <= 200)
      for (size_t i = 0; i < validation_series.losses.size(); ++i)
        svg +=
            format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", chart.map_x(validation_series.steps[i]),
                   chart.map_y(validation_series.losses[i]), kValidationColour);
  }

  // Legend, top right inside the plot.
  struct Entry {
    const char *label, *colour, *opacity;
    double width;
  };
  std::vector<Entry> entries;
  if (!train_series.losses.empty()) {
    entries.push_back({"train (raw)", kTrainColour, "0.3", 1});
    entries.push_back({"train (moving average)", kTrainColour, "1", 2});
  }
  if (!validation_series.losses.empty()) entries.push_back({"validation", kValidationColour, "1", 2});
  double legend_x = kLeft + kPlotWidth - 190, legend_y = kTop + 10;
  if (!entries.empty())
    svg += format(
        "<rect x=\"%.0f\" y=\"%.0f\" width=\"180\" height=\"%.0f\" fill=\"white\" fill-opacity=\"0.85\" "
        "stroke=\"#ccc\"/>\n",
        legend_x, legend_y, 8 + 18.0 * static_cast<double>(entries.size()));
  for (size_t i = 0; i < entries.size(); ++i) {
    double y = legend_y + 16 + 18.0 * static_cast<double>(i);
    svg += format(
        "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-opacity=\"%s\" "
        "stroke-width=\"%.0f\"/><text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
        legend_x + 8, y - 4, legend_x + 32, y - 4, entries[i].colour, entries[i].opacity, entries[i].width,
        legend_x + 40, y, entries[i].label);
  }
  svg += "</svg>\n";
  return svg;
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
