// Benchmarks registered op problems: times the dispatched path (or one implementation), the
// in-process peers (oneDNN, OpenBLAS) and any other configs asked for on the same inputs, and
// reports GFLOP/s, GB/s and % of the roofline from measured machine peaks. Used by `lathe bench`.
#pragma once

#include <string>
#include <vector>

#include "lathe/bench/machine_peaks.h"
#include "lathe/bench/timing.h"
#include "lathe/core/json.h"
#include "lathe/ops/problem.h"

namespace lathe {

struct PeerTiming {
  std::string name;
  std::string detail;  // the peer's own kernel where it says ("brg:avx512_core_bf16"), else empty
  TimingStats timing;
  // Over rounds in which lathe and the peers ran in interleaved blocks (op_bench.cc), the median of
  // the peer's block median / lathe's: > 1 means lathe is faster.
  double speedup = 0;
  double speedup_low = 0, speedup_high = 0;  // the lowest and highest round's ratio: the spread
};

struct BenchRow {
  std::string op, label, shape, dispatch;  // dispatch: impl (config source) config
  TimingStats timing;
  OpCost cost;
  double gflops = 0, gbytes = 0, roofline_percent = 0;
  std::string bound;  // "compute" or "memory": which floor is larger
  std::vector<PeerTiming> peers;
};

// A config given as "op:impl:name=value,..." (the --pin format).
struct RivalConfig {
  std::string op, impl;
  ConfigParams config;
  static RivalConfig parse(const std::string& text);  // throws lathe::Error on a malformed text
};

struct BenchOptions {
  std::string impl;                // empty: full dispatch
  std::vector<std::string> peers;  // peer names to time when the problem offers them
  // Configs of lathe's own implementations timed beside the dispatched path like peers (rows of
  // other ops ignore them): a fair A/B of a config against the default on a noisy machine.
  std::vector<RivalConfig> configs;
  TimingOptions timing{2, 10, 1000, 0.5};
  double max_seconds_per_row = 3;  // fewer runs for very slow problems
};

BenchRow bench_problem(OpProblem& problem, const std::string& label, const std::string& shape,
                       const MachinePeaks& peaks, const BenchOptions& options);
// Recomputes GFLOP/s-derived fields against (possibly updated) peaks: roofline %, bound.
void apply_roofline(BenchRow& row, const MachinePeaks& peaks);
// A row above this % of the roofline is flagged: either the peak was measured low (shared
// machines) or the op's cost model counts too little. Never celebrated as a result.
constexpr double kImplausibleRooflinePercent = 100.0;
Json bench_row_to_json(const BenchRow& row);
std::string format_bench_header();
std::string format_bench_row(const BenchRow& row);

// The benchmark rows as an SVG bar chart of % of roofline: compute-bound rows blue, memory-bound
// orange, peer ratios to the right.
std::string bench_rows_to_svg(const std::vector<BenchRow>& rows, const std::string& title);

}  // namespace lathe
