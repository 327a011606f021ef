#include "lathe/bench/bench_svg.h"
#include "lathe/core/xml_escape.h"

#include <algorithm>
#include <cstdio>

namespace lathe {

std::string bench_rows_to_svg(const std::vector<BenchRow>& rows, const std::string& title) {
  const int row_height = 22, label_width = 560, bar_width = 420, top = 50;
  const int width = label_width + bar_width + 260;
  const int height = top + row_height * static_cast<int>(rows.size()) + 40;
  std::string svg;
  char buffer[1024];
  std::snprintf(buffer, sizeof buffer,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"monospace\" "
                "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                "<text x=\"10\" y=\"22\" font-size=\"15\">%s</text>\n"
                "<text x=\"%d\" y=\"42\" fill=\"#555\">%% of roofline (blue: compute-bound, orange: memory-bound)</text>\n",
                width, height, escape_xml(title).c_str(), label_width);
  svg += buffer;
  for (int tick = 0; tick <= 100; tick += 25) {
    int x = label_width + bar_width * tick / 100;
    std::snprintf(buffer, sizeof buffer,
                  "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/><text x=\"%d\" y=\"%d\" "
                  "fill=\"#777\">%d</text>\n",
                  x, top - 4, x, height - 30, x - 8, height - 14, tick);
    svg += buffer;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const BenchRow& row = rows[i];
    int y = top + row_height * static_cast<int>(i);
    double percent = std::clamp(row.roofline_percent, 0.0, 100.0);
    const char* colour = row.bound == "compute" ? "#3b7dd8" : "#e8912d";
    std::string peers;
    for (const auto& peer : row.peers) {
      std::snprintf(buffer, sizeof buffer, "%s%.2fx vs %s", peers.empty() ? "" : ", ", peer.speedup, peer.name.c_str());
      peers += buffer;
    }
    std::snprintf(buffer, sizeof buffer,
                  "<text x=\"10\" y=\"%d\">%s</text>\n<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
                  "fill=\"%s\"/>\n<text x=\"%d\" y=\"%d\">%.1f%% %s</text>\n",
                  y + 15, escape_xml((row.op + "  " + row.label).substr(0, 78)).c_str(), label_width, y + 3,
                  bar_width * percent / 100.0, row_height - 6, colour, label_width + bar_width + 8, y + 15,
                  row.roofline_percent, escape_xml(peers).c_str());
    svg += buffer;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace lathe
