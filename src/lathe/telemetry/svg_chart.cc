#include "lathe/telemetry/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lathe/core/error.h"
#include "lathe/core/xml_escape.h"

namespace lathe {
namespace {

// Line chart geometry in SVG user units (pixels at 100% zoom).
constexpr double kWidth = 860, kHeight = 500;
constexpr double kLeft = 80, kRight = 30, kTop = 66, kBottom = 56;
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;

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

// Data coordinates -> SVG coordinates of the plot area.
struct Plot {
  ChartAxis x, y;
  double map_x(double value) const { return kLeft + (value - x.low) / (x.high - x.low) * kPlotWidth; }
  double map_y(double value) const {
    double fraction = y.logarithmic ? (std::log10(value) - std::log10(y.low)) / (std::log10(y.high) - std::log10(y.low))
                                    : (value - y.low) / (y.high - y.low);
    return kTop + kPlotHeight * (1 - fraction);
  }
};

// Polyline points, reduced to first/min/max/last per pixel column: thousands of points per pixel
// would bloat the file without changing the picture, but spikes must stay visible.
std::string polyline_points(const Plot& plot, const std::vector<double>& steps, const std::vector<double>& losses) {
  std::string out;
  auto emit = [&](size_t i) { out += format("%.1f,%.1f ", plot.map_x(steps[i]), plot.map_y(losses[i])); };
  size_t begin = 0;
  while (begin < steps.size()) {
    auto column = static_cast<int64_t>(std::floor(plot.map_x(steps[begin])));
    size_t end = begin, lowest = begin, highest = begin;
    while (end < steps.size() && static_cast<int64_t>(std::floor(plot.map_x(steps[end]))) == column) {
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

// Width of text in a monospace font: 0.6 em per character (UTF-8 continuation bytes do not count),
// rounded up so a chart sized by it never clips its last glyph.
int monospace_width(const std::string& text, double font_size) {
  int64_t characters = 0;
  for (unsigned char c : text) characters += (c & 0xc0) != 0x80;
  return static_cast<int>(std::ceil(static_cast<double>(characters) * 0.6 * font_size));
}

}  // namespace

std::string percent_bar_chart_svg(const std::vector<PercentBar>& bars, const std::string& title,
                                  const std::string& legend, const BarChartLayout& layout) {
  // The layout's widths are minimums: the label column, the text right of the bars and the title
  // grow to fit their longest text, so nothing is cut off at an edge.
  constexpr int kMargin = 10, kGap = 8, kFontSize = 12;
  const int top = 56, bar_width = layout.bar_width;
  int label_width = layout.label_width, right_width = layout.right_width;
  for (const PercentBar& bar : bars) {
    label_width = std::max(label_width, kMargin + monospace_width(bar.label, kFontSize) + kGap);
    right_width =
        std::max(right_width, kGap + monospace_width(format("%.1f%%  ", bar.percent) + bar.right, kFontSize) + kMargin);
  }
  const int width = std::max({label_width + bar_width + right_width, 2 * kMargin + monospace_width(title, 15),
                              2 * kMargin + monospace_width(legend, kFontSize)});
  const int height = top + layout.row_height * static_cast<int>(bars.size()) + 40;
  std::string svg;
  char buffer[256];
  std::snprintf(buffer, sizeof buffer,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"monospace\" "
                "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                width, height);
  svg += buffer;
  svg += "<text x=\"10\" y=\"22\" font-size=\"15\">" + escape_xml(title) + "</text>\n";
  svg += "<text x=\"10\" y=\"42\" fill=\"#555\">" + escape_xml(legend) + "</text>\n";
  for (int tick = 0; tick <= 100; tick += 25) {
    const int x = label_width + bar_width * tick / 100;
    std::snprintf(buffer, sizeof buffer,
                  "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/><text x=\"%d\" y=\"%d\" "
                  "fill=\"#777\">%d%%</text>\n",
                  x, top - 4, x, height - 30, x - 10, height - 14, tick);
    svg += buffer;
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const PercentBar& bar = bars[i];
    const int y = top + layout.row_height * static_cast<int>(i);
    const double percent = std::clamp(bar.percent, 0.0, 100.0);
    svg += str_cat("<text x=\"10\" y=\"", y + 15, "\">", escape_xml(bar.label), "</text>\n");
    std::snprintf(buffer, sizeof buffer, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">",
                  label_width, y + 3, bar_width * percent / 100.0, layout.row_height - 6, bar.colour.c_str());
    svg += buffer;
    if (!bar.tooltip.empty()) svg += "<title>" + escape_xml(bar.tooltip) + "</title>";
    std::snprintf(buffer, sizeof buffer, "</rect>\n<text x=\"%d\" y=\"%d\">%.1f%%  ", label_width + bar_width + kGap,
                  y + 15, bar.percent);
    svg += buffer;
    svg += escape_xml(bar.right) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

ChartAxis logarithmic_axis(double data_min, double data_max) {
  LATHE_ASSERT(data_min > 0 && data_min <= data_max && std::isfinite(data_max));
  ChartAxis axis;
  axis.logarithmic = true;
  int low_exponent = static_cast<int>(std::floor(std::log10(data_min)));
  int high_exponent = std::max(static_cast<int>(std::ceil(std::log10(data_max))), low_exponent + 1);
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

ChartAxis choose_axis(double data_min, double data_max, bool allow_logarithmic, double minimum_step) {
  LATHE_ASSERT(std::isfinite(data_min) && std::isfinite(data_max) && data_min <= data_max);
  if (allow_logarithmic && data_min > 0 && data_max / data_min > 100) return logarithmic_axis(data_min, data_max);
  ChartAxis axis;
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

std::string line_chart_svg(const LineChart& chart) {
  const Plot plot{chart.x_axis, chart.y_axis};
  std::string svg = format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, kHeight, kWidth, kHeight);
  svg += format("<text x=\"%.0f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">", kLeft) + escape_xml(chart.title) +
         "</text>\n";
  svg += format("<text x=\"%.0f\" y=\"46\" fill=\"#555\">", kLeft) + escape_xml(chart.subtitle) + "</text>\n";

  // Gridlines and tick labels.
  for (double tick : plot.y.ticks) {
    double y = plot.map_y(tick);
    svg += format("<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>", kLeft, y,
                  kLeft + kPlotWidth, y);
    svg += format("<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">", kLeft - 6, y + 4) +
           format_tick(tick, plot.y) + "</text>\n";
  }
  for (double tick : plot.x.ticks) {
    double x = plot.map_x(tick);
    svg += format("<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#e4e4e4\"/>", x, kTop, x,
                  kTop + kPlotHeight);
    svg += format("<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#555\">", x, kTop + kPlotHeight + 18) +
           format_tick(tick, plot.x) + "</text>\n";
  }
  svg += format("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#888\"/>\n", kLeft,
                kTop, kPlotWidth, kPlotHeight);
  svg += format("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">", kLeft + kPlotWidth / 2, kHeight - 12) +
         escape_xml(chart.x_label) + "</text>\n";
  svg += format("<text transform=\"translate(18 %.0f) rotate(-90)\" text-anchor=\"middle\">", kTop + kPlotHeight / 2) +
         escape_xml(chart.y_label) + (plot.y.logarithmic ? " (log scale)" : "") + "</text>\n";

  bool any_point = false;
  for (const LineSeries& series : chart.series) any_point = any_point || !series.y.empty();
  if (!any_point && !chart.empty_message.empty())
    svg += format("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#888\">", kLeft + kPlotWidth / 2,
                  kTop + kPlotHeight / 2) +
           escape_xml(chart.empty_message) + "</text>\n";
  for (const LineSeries& series : chart.series) {
    LATHE_ASSERT(series.x.size() == series.y.size());
    if (series.y.empty()) continue;
    const std::string opacity = series.opacity < 1 ? format(" stroke-opacity=\"%g\"", series.opacity) : "";
    svg += format("<polyline fill=\"none\" stroke=\"%s\"%s stroke-width=\"%g\" points=\"", series.colour.c_str(),
                  opacity.c_str(), series.width) +
           polyline_points(plot, series.x, series.y) + "\"/>\n";
    const bool circles = series.markers == PointMarkers::all         ? series.y.size() <= 200
                         : series.markers == PointMarkers::if_single ? series.y.size() == 1
                                                                     : false;
    if (circles)
      for (size_t i = 0; i < series.y.size(); ++i)
        svg += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", plot.map_x(series.x[i]),
                      plot.map_y(series.y[i]), series.colour.c_str());
  }

  // Legend, top right inside the plot.
  std::vector<const LineSeries*> entries;
  for (const LineSeries& series : chart.series)
    if (!series.label.empty() && !series.y.empty()) entries.push_back(&series);
  double legend_x = kLeft + kPlotWidth - 190, legend_y = kTop + 10;
  if (!entries.empty())
    svg += format(
        "<rect x=\"%.0f\" y=\"%.0f\" width=\"180\" height=\"%.0f\" fill=\"white\" fill-opacity=\"0.85\" "
        "stroke=\"#ccc\"/>\n",
        legend_x, legend_y, 8 + 18.0 * static_cast<double>(entries.size()));
  for (size_t i = 0; i < entries.size(); ++i) {
    double y = legend_y + 16 + 18.0 * static_cast<double>(i);
    svg += format(
               "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-opacity=\"%g\" "
               "stroke-width=\"%g\"/><text x=\"%.0f\" y=\"%.0f\">",
               legend_x + 8, y - 4, legend_x + 32, y - 4, entries[i]->colour.c_str(), entries[i]->opacity,
               entries[i]->width, legend_x + 40, y) +
           escape_xml(entries[i]->label) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

namespace {

// The number in attribute `name`="..." of the root <svg ...> tag of a chart made here.
double root_attribute(const std::string& svg, const std::string& name) {
  const size_t tag_end = svg.find('>');
  const size_t at = svg.find(" " + name + "=\"");
  LATHE_ASSERT(tag_end != std::string::npos && at != std::string::npos && at < tag_end);
  return std::stod(svg.substr(at + name.size() + 3));
}

}  // namespace

std::string stack_svgs_vertically(const std::vector<std::string>& charts) {
  double width = 0, height = 0;
  for (const std::string& chart : charts) width = std::max(width, root_attribute(chart, "width"));
  std::string body;
  for (const std::string& chart : charts) {
    // A nested <svg> placed at (0, height): the chart's own root with a position added.
    const size_t open = chart.find("<svg");
    LATHE_ASSERT(open != std::string::npos);
    body += format("<svg x=\"0\" y=\"%.0f\"", height) + chart.substr(open + 4);
    if (body.back() != '\n') body += '\n';
    height += root_attribute(chart, "height");
  }
  return format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
                width, height, width, height) +
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + body + "</svg>\n";
}

}  // namespace lathe
