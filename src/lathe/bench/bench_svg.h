// Self-contained SVG bar charts of % of the roofline: one bar per row (coloured by what bounds it,
// or by a verdict), with a label on the left and ratios written to the right. The op benchmark
// and the kernel suite both draw their pictures with roofline_bar_chart_svg.
#pragma once

#include <string>
#include <vector>

#include "lathe/bench/op_bench.h"

namespace lathe {

struct RooflineBar {
  std::string label;    // left of the bar
  double percent = 0;   // % of the roofline (the bar is clamped to 0..100)
  std::string colour;   // e.g. "#3b7dd8"
  std::string right;    // written after the percentage (peer ratios, speedups)
  std::string tooltip;  // <title> of the bar; empty: none
};

struct RooflineChartLayout {
  int row_height = 22, label_width = 560, bar_width = 420, right_width = 260;
};

// legend: the second line under the title (what the colours mean).
std::string roofline_bar_chart_svg(const std::vector<RooflineBar>& bars, const std::string& title,
                                   const std::string& legend, const RooflineChartLayout& layout = {});

// The op benchmark's chart: compute-bound rows blue, memory-bound orange, peer ratios to the right.
std::string bench_rows_to_svg(const std::vector<BenchRow>& rows, const std::string& title);

}  // namespace lathe
