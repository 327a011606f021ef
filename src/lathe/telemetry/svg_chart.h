// The one chart writer: every picture lathe draws is a self-contained SVG (no scripts, external
// fonts or links) made here, in one of two kinds.
//   Bar charts: one horizontal bar per row showing a percentage (0..100), a label on the left and
//     text on the right; `lathe bench` (% of roofline), the kernel suite and `lathe goodput` use it.
//   Line charts: series of (x, y) points over axes with "nice" ticks and gridlines, an optional
//     logarithmic y axis, a legend and a title with a subtitle; the loss curve uses it.
#pragma once

#include <string>
#include <vector>

namespace lathe {

// ---- bar charts ----

struct PercentBar {
  std::string label;    // left of the bar
  double percent = 0;   // the bar's length in % (clamped to 0..100; the number is written as is)
  std::string colour;   // e.g. "#3b7dd8"
  std::string right;    // written after the percentage (peer ratios, speedups)
  std::string tooltip;  // <title> of the bar; empty: none
};

// label_width and right_width are minimums: the chart widens to fit its longest label, right-hand
// text and title (monospace glyphs of 0.6 em), so no text is clipped at an edge.
struct BarChartLayout {
  int row_height = 22, label_width = 560, bar_width = 420, right_width = 260;
};

// legend: the second line under the title (what the colours mean).
std::string percent_bar_chart_svg(const std::vector<PercentBar>& bars, const std::string& title,
                                  const std::string& legend, const BarChartLayout& layout = {});

// ---- line charts ----

// An axis covering [low, high] with "nice" ticks (1, 2 or 5 times a power of ten; on a log axis,
// powers of ten, plus 2x and 5x when the range spans few decades). low <= data min, high >= max.
// A log axis is chosen (when allowed) for positive data spanning more than two decades.
// minimum_step: 1 for integer data such as steps (ticks 4, 5, 6 rather than 4.0, 4.5, ...).
struct ChartAxis {
  double low = 0, high = 1;
  bool logarithmic = false;
  std::vector<double> ticks;
};
ChartAxis choose_axis(double data_min, double data_max, bool allow_logarithmic, double minimum_step = 0);
// A logarithmic axis whatever the range (0 < data_min <= data_max), from the decade below to the
// decade above (at least one decade).
ChartAxis logarithmic_axis(double data_min, double data_max);

enum class PointMarkers {
  none,
  if_single,  // a circle when the series has one point (a one-point line is invisible)
  all,        // a circle at every point, up to 200 points
};

struct LineSeries {
  std::string label;   // legend entry; empty: not in the legend
  std::string colour;  // e.g. "#3b7dd8"
  double opacity = 1, width = 2;
  PointMarkers markers = PointMarkers::none;
  std::vector<double> x, y;  // finite values, x ascending; long series are reduced to the
                             // first/min/max/last point per pixel column (spikes stay visible)
};

struct LineChart {
  std::string title, subtitle;
  std::string x_label, y_label;  // " (log scale)" is appended to y_label on a log axis
  ChartAxis x_axis, y_axis;      // from choose_axis over the data
  std::vector<LineSeries> series;
  std::string empty_message;  // drawn in the plot when no series has a point
};

std::string line_chart_svg(const LineChart& chart);

// ---- pictures of several charts ----

// One SVG holding the given charts (each a whole SVG from this file) one below the other, as wide
// as the widest: a loss chart over its learning-rate chart, a goodput breakdown over its timeline.
std::string stack_svgs_vertically(const std::vector<std::string>& charts);

}  // namespace lathe
