// The chart writer's two kinds on their own (the loss curve test covers a typical line chart and
// the axes): bar lengths, clamping, escaping and tooltips; markers, legend and log-axis labels.
#include "lathe/telemetry/svg_chart.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "svg_markup.h"

namespace lathe {
namespace {

// The width attribute of the k-th bar (the k-th <rect after the background one).
double bar_width(const std::string& svg, size_t k) {
  size_t at = svg.find("<rect");  // background
  for (size_t i = 0; i <= k; ++i) at = svg.find("<rect", at + 1);
  double width = -1;
  std::sscanf(svg.c_str() + svg.find("width=\"", at) + 7, "%lf", &width);
  return width;
}

TEST(SvgChart, BarLengthsAreThePercentOfTheBarWidthClampedToTheChart) {
  BarChartLayout layout;
  layout.bar_width = 400;
  std::vector<PercentBar> bars = {{"half <a&b>", 50, "#111111", "1.5x vs peer", "tip \"one\""},
                                  {"over", 180, "#222222", "", ""},
                                  {"negative", -5, "#333333", "", ""}};
  const std::string svg = percent_bar_chart_svg(bars, "title & more", "legend", layout);
  expect_self_contained_and_balanced(svg);
  EXPECT_EQ(count(svg, "<rect"), 4u);  // background + 3 bars
  EXPECT_DOUBLE_EQ(bar_width(svg, 0), 200.0);
  EXPECT_DOUBLE_EQ(bar_width(svg, 1), 400.0);        // 180% drawn full length ...
  EXPECT_NE(svg.find("180.0%"), std::string::npos);  // ... and written as measured
  EXPECT_DOUBLE_EQ(bar_width(svg, 2), 0.0);
  EXPECT_NE(svg.find("half &lt;a&amp;b&gt;"), std::string::npos);
  EXPECT_NE(svg.find("title &amp; more"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>"), 1u);  // only the bar with a tooltip
}

// Every <text> of a bar chart ends inside the picture, measuring a glyph of a monospace font as
// 0.6 em (its usual advance; the chart asks for font-family monospace). XML entities count as one glyph.
TEST(SvgChart, BarChartTextIsNeverClippedAtTheRightEdge) {
  const std::string long_right = "1.02x vs oneDNN, 0.97x vs OpenBLAS, 31.4x vs the float64 reference";
  const std::string long_label = std::string(120, 'L') + " matmul m=4096,n=4096,k=4096,dtype=bf16";
  std::vector<PercentBar> bars = {{"rms_norm", 42, "#111111", long_right, ""}, {long_label, 7, "#222222", "", ""}};
  const std::string svg = percent_bar_chart_svg(bars, std::string(150, 'T'), "legend", BarChartLayout{});
  expect_self_contained_and_balanced(svg);
  double svg_width = 0;
  std::sscanf(svg.c_str() + svg.find("width=\"") + 7, "%lf", &svg_width);
  int texts = 0;
  for (size_t at = svg.find("<text"); at != std::string::npos; at = svg.find("<text", at + 1)) {
    double x = 0, font_size = 12;
    std::sscanf(svg.c_str() + svg.find("x=\"", at) + 3, "%lf", &x);
    const size_t open_end = svg.find('>', at);
    const size_t size_at = svg.find("font-size=\"", at);
    if (size_at < open_end) std::sscanf(svg.c_str() + size_at + 11, "%lf", &font_size);
    std::string content = svg.substr(open_end + 1, svg.find("</text>", at) - open_end - 1);
    size_t glyphs = 0;
    for (size_t i = 0; i < content.size(); ++i, ++glyphs)
      if (content[i] == '&') i = content.find(';', i);
    EXPECT_LE(x + static_cast<double>(glyphs) * 0.6 * font_size, svg_width) << content;
    ++texts;
  }
  EXPECT_GE(texts, 4 + 5);  // title, legend, 2 labels, 2 right texts (+ 5 tick labels)
  // The bars start after the longest label.
  double bar_x = 0;
  std::sscanf(svg.c_str() + svg.find("x=\"", svg.find("<rect", svg.find("<rect") + 1)) + 3, "%lf", &bar_x);
  EXPECT_GE(bar_x, 10 + static_cast<double>(long_label.size()) * 0.6 * 12);
}

TEST(SvgChart, LineChartMarkersLegendAndLogAxisLabel) {
  LineChart chart;
  chart.title = "t";
  chart.x_label = "step";
  chart.y_label = "loss";
  chart.x_axis = choose_axis(0, 10, false, 1);
  chart.y_axis = choose_axis(0.01, 100, true);
  ASSERT_TRUE(chart.y_axis.logarithmic);
  chart.series.push_back({"single", "#111111", 1, 2, PointMarkers::if_single, {5}, {1}});
  chart.series.push_back({"", "#222222", 1, 2, PointMarkers::all, {0, 5, 10}, {0.1, 1, 10}});
  chart.series.push_back({"unmarked", "#333333", 0.5, 1, PointMarkers::none, {0, 10}, {0.02, 50}});
  const std::string svg = line_chart_svg(chart);
  expect_self_contained_and_balanced(svg);
  EXPECT_EQ(count(svg, "<polyline"), 3u);
  EXPECT_EQ(count(svg, "<circle"), 1u + 3u);
  EXPECT_NE(svg.find(">single</text>"), std::string::npos);
  EXPECT_NE(svg.find(">unmarked</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "stroke-width=\"2\"/><text"), 1u);  // legend rows: "single" and "unmarked" only
  EXPECT_EQ(count(svg, "stroke-width=\"1\"/><text"), 1u);
  EXPECT_NE(svg.find(">loss (log scale)</text>"), std::string::npos);

  LineChart empty = chart;
  empty.series.clear();
  empty.empty_message = "nothing yet";
  const std::string nothing = line_chart_svg(empty);
  EXPECT_NE(nothing.find(">nothing yet</text>"), std::string::npos);
  EXPECT_EQ(count(nothing, "<polyline"), 0u);
}

}  // namespace
}  // namespace lathe
