#include "lathe/bench/bench_svg.h"

#include <algorithm>
#include <cstdio>

#include "lathe/core/xml_escape.h"

namespace lathe {

std::string roofline_bar_chart_svg(const std::vector<RooflineBar>& bars, const std::string& title,
                                   const std::string& legend, const RooflineChartLayout& layout) {
  const int top = 56, label_width = layout.label_width, bar_width = layout.bar_width;
  const int width = label_width + bar_width + layout.right_width;
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
    const RooflineBar& bar = bars[i];
    const int y = top + layout.row_height * static_cast<int>(i);
    const double percent = std::clamp(bar.percent, 0.0, 100.0);
    svg += str_cat("<text x=\"10\" y=\"", y + 15, "\">", escape_xml(bar.label), "</text>\n");
    std::snprintf(buffer, sizeof buffer, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\">",
                  label_width, y + 3, bar_width * percent / 100.0, layout.row_height - 6, bar.colour.c_str());
    svg += buffer;
    if (!bar.tooltip.empty()) svg += "<title>" + escape_xml(bar.tooltip) + "</title>";
    std::snprintf(buffer, sizeof buffer, "</rect>\n<text x=\"%d\" y=\"%d\">%.1f%%  ", label_width + bar_width + 8,
                  y + 15, bar.percent);
    svg += buffer;
    svg += escape_xml(bar.right) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

std::string bench_rows_to_svg(const std::vector<BenchRow>& rows, const std::string& title) {
  std::vector<RooflineBar> bars;
  for (const BenchRow& row : rows) {
    RooflineBar bar;
    bar.label = (row.op + "  " + row.label).substr(0, 78);
    bar.percent = row.roofline_percent;
    bar.colour = row.bound == "compute" ? "#3b7dd8" : "#e8912d";
    for (const auto& peer : row.peers) {
      char ratio[64];
      std::snprintf(ratio, sizeof ratio, "%.2fx vs ", peer.speedup);
      bar.right += (bar.right.empty() ? "" : ", ") + std::string(ratio) + peer.name;
    }
    bars.push_back(bar);
  }
  return roofline_bar_chart_svg(bars, title, "% of roofline (blue: compute-bound, orange: memory-bound)");
}

}  // namespace lathe
