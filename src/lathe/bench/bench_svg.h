// A self-contained SVG bar chart of a benchmark run: one bar per row showing % of the roofline
// (compute- or memory-bound, coloured), with the peer ratios written beside it.
#pragma once

#include <string>
#include <vector>

#include "lathe/bench/op_bench.h"

namespace lathe {

std::string bench_rows_to_svg(const std::vector<BenchRow>& rows, const std::string& title);

}  // namespace lathe
