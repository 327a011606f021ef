#include "lathe/bench/op_bench.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "lathe/bench/vendor_setup.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/error.h"
#include "lathe/telemetry/svg_chart.h"

namespace lathe {

static TimingOptions budgeted(const TimingOptions& base, double single_run_seconds, double max_seconds) {
  TimingOptions options = base;
  if (single_run_seconds * options.min_runs > max_seconds) {
    options.warmup_runs = 0;
    options.min_runs = std::max(3, static_cast<int>(max_seconds / std::max(single_run_seconds, 1e-9)));
    options.min_seconds = 0;
  }
  return options;
}

static TimingStats time_with_budget(const std::function<void()>& run, const std::function<void()>& prepare,
                                    const BenchOptions& options) {
  prepare();
  double start = now_seconds();
  run();  // first run doubles as warm-up and as the estimate for the run budget
  double single = now_seconds() - start;
  return time_runs(run, budgeted(options.timing, single, options.max_seconds_per_row), prepare);
}

RivalConfig RivalConfig::parse(const std::string& text) {
  const size_t first = text.find(':');
  const size_t second = first == std::string::npos ? first : text.find(':', first + 1);
  LATHE_CHECK(second != std::string::npos && first > 0 && second > first + 1, "malformed config '", text,
              "' (expected op:impl:name=value,...)");
  return {text.substr(0, first), text.substr(first + 1, second - first - 1),
          ConfigParams::parse(text.substr(second + 1))};
}

// A path timed beside lathe's: a peer library, or another config of lathe's own.
struct Rival {
  std::string name;
  std::function<void()> run;
  std::string detail;  // PeerTiming::detail
};

// With rivals, lathe and each rival run in interleaved blocks (time_interleaved_blocks) for as
// many runs as time_runs would give lathe alone (options.timing, capped by max_seconds_per_row
// per path); a block is about 20 ms of runs (1 to 5), at least 3 rounds. A rival's speedup is the
// median over rounds of its block median / lathe's (block_ratios), the lowest and highest round
// beside it.
static void time_with_rivals(OpProblem& problem, const std::function<void()>& lathe_run,
                             const std::vector<Rival>& rivals, const BenchOptions& options, BenchRow& row) {
  auto prepare = [&problem] { problem.prepare_run(); };
  std::vector<TimedRun> paths = {timed_run(lathe_run, prepare)};
  for (const auto& rival : rivals) paths.push_back(timed_run(rival.run, prepare));
  const double single = paths.front()();  // the first run doubles as warm-up and the run estimate
  for (size_t p = 1; p < paths.size(); ++p) paths[p]();  // a peer's first call may generate code
  const TimingOptions budget = budgeted(options.timing, single, options.max_seconds_per_row);
  const double wanted = std::max(static_cast<double>(budget.min_runs), budget.min_seconds / std::max(single, 1e-9));
  const int runs = static_cast<int>(std::min<double>(wanted, budget.max_runs));
  const int runs_per_block = std::clamp(static_cast<int>(0.02 / std::max(single, 1e-9)), 1, 5);
  const int blocks = std::max(3, (runs + runs_per_block - 1) / runs_per_block);
  const std::vector<InterleavedSamples> timed_paths =
      time_interleaved_blocks(paths, budget.warmup_runs, blocks, runs_per_block);
  row.timing = timing_stats(timed_paths.front().samples);
  for (size_t p = 1; p < timed_paths.size(); ++p) {
    PeerTiming timing;
    timing.name = rivals[p - 1].name;
    timing.detail = rivals[p - 1].detail;
    timing.timing = timing_stats(timed_paths[p].samples);
    const std::vector<double> ratios = block_ratios(timed_paths[p], timed_paths.front());
    if (!ratios.empty()) {
      timing.speedup = median(ratios);
      const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
      timing.speedup_low = *low, timing.speedup_high = *high;
    }
    row.peers.push_back(timing);
  }
}

// The rivals of one row: the peers the problem offers, then the configs given for its op, each
// checked against its implementation's config space here (a config the op would refuse is an
// error, not a row timed with something else).
static std::vector<Rival> rivals_for(OpProblem& problem, const BenchOptions& options) {
  std::vector<Rival> rivals;
  const std::vector<std::string> available = problem.peers();
  for (const auto& peer : options.peers)
    if (std::find(available.begin(), available.end(), peer) != available.end())
      rivals.push_back({peer, [&problem, peer] { problem.run_peer(peer); }, problem.peer_detail(peer)});
  for (const RivalConfig& rival : options.configs) {
    if (rival.op != problem.op_name()) continue;
    const std::vector<std::string> impls = problem.impl_names();
    if (std::find(impls.begin(), impls.end(), rival.impl) == impls.end()) {
      std::string usable;
      for (const auto& name : impls) usable += (usable.empty() ? "" : ", ") + name;
      throw_error(rival.op, ": implementation '", rival.impl, "' cannot run here (usable: ", usable, ")");
    }
    const std::vector<ConfigParams> space = problem.config_space(rival.impl);
    LATHE_CHECK(std::find(space.begin(), space.end(), rival.config) != space.end(), rival.op, ":", rival.impl,
                ": config '", rival.config.to_string(), "' is not in this implementation's config space for ",
                problem.shape_key(), " (see `lathe tune ", rival.op, " --list`)");
    rivals.push_back({rival.impl + ":" + rival.config.to_string(),
                      [&problem, &rival] { problem.run(rival.impl, &rival.config); }, ""});
  }
  return rivals;
}

BenchRow bench_problem(OpProblem& problem, const std::string& label, const std::string& shape,
                       const MachinePeaks& peaks, const BenchOptions& options) {
  BenchRow row;
  row.op = problem.op_name();
  row.label = label;
  row.shape = shape;
  row.cost = problem.cost();
  ConfigParams heuristic;
  if (options.impl.empty()) {
    row.dispatch = problem.describe_dispatch();
  } else {
    heuristic = problem.heuristic_config(options.impl);
    row.dispatch = options.impl + " (heuristic) " + heuristic.to_string();
  }
  auto lathe_run = [&] { problem.run(options.impl, options.impl.empty() ? nullptr : &heuristic); };
  const std::vector<Rival> rivals = rivals_for(problem, options);
  if (rivals.empty()) {
    row.timing = time_with_budget(lathe_run, [&] { problem.prepare_run(); }, options);
  } else {
    match_vendor_threads();
    time_with_rivals(problem, lathe_run, rivals, options, row);
  }
  double seconds = row.timing.median;
  row.gflops = row.cost.flops / seconds / 1e9;
  row.gbytes = row.cost.bytes / seconds / 1e9;
  apply_roofline(row, peaks);
  return row;
}

// The row's FLOPs at the peaks of the engines they ran on: bf16 inputs on the AMX implementation at
// the AMX peak, on a vdpbf16ps one ("avx512_bf16") at the vdpbf16ps peak; products handed to
// matmul (matmul_bf16_flops) at the peak of the engine matmul's dispatch takes here; every other
// implementation (bf16 inputs widened to f32 included) on the FMAs.
static double compute_floor_seconds(const BenchRow& row, const MachinePeaks& peaks) {
  const bool bf16 = row.shape.find("dtype=bf16") != std::string::npos;
  const std::string impl = row.dispatch.substr(0, row.dispatch.find(' '));
  auto at = [](double flops, double gflops) { return gflops > 0 ? flops / (gflops * 1e9) : 0.0; };
  const double handed = bf16 ? std::min(row.cost.matmul_bf16_flops, row.cost.flops) : 0.0;
  if (handed > 0) {
    const double engine = active_isa() >= Isa::avx512_bf16 ? peaks.bf16_matmul_gflops() : peaks.f32_gflops;
    return at(handed, engine) + at(row.cost.flops - handed, peaks.f32_gflops);
  }
  if (bf16 && impl == "amx" && peaks.amx_gflops > 0) return at(row.cost.flops, peaks.amx_gflops);
  if (bf16 && impl == isa_name(Isa::avx512_bf16) && peaks.bf16_gflops > 0) return at(row.cost.flops, peaks.bf16_gflops);
  return at(row.cost.flops, peaks.f32_gflops);
}

void apply_roofline(BenchRow& row, const MachinePeaks& peaks) {
  double compute_floor = compute_floor_seconds(row, peaks);
  double memory_floor = peaks.floor_seconds(0, row.cost.bytes);
  row.bound = compute_floor >= memory_floor ? "compute" : "memory";
  row.roofline_percent = 100.0 * std::max(compute_floor, memory_floor) / row.timing.median;
}

static Json timing_to_json(const TimingStats& timing) {
  Json json = Json::object();
  json.set("median_seconds", timing.median);
  json.set("min_seconds", timing.min);
  json.set("p80_seconds", timing.p80);
  json.set("runs", timing.runs);
  return json;
}

Json bench_row_to_json(const BenchRow& row) {
  Json json = Json::object();
  json.set("op", row.op);
  json.set("label", row.label);
  json.set("shape", row.shape);
  json.set("dispatch", row.dispatch);
  json.set("timing", timing_to_json(row.timing));
  json.set("flops", row.cost.flops);
  json.set("bytes", row.cost.bytes);
  json.set("gflops_per_second", row.gflops);
  json.set("gbytes_per_second", row.gbytes);
  json.set("roofline_percent", row.roofline_percent);
  json.set("bound", row.bound);
  json.set("beyond_roofline", row.roofline_percent > kImplausibleRooflinePercent);
  Json peers = Json::array();
  for (const auto& peer : row.peers) {
    Json item = Json::object();
    item.set("name", peer.name);
    if (!peer.detail.empty()) item.set("implementation", peer.detail);
    item.set("timing", timing_to_json(peer.timing));
    item.set("lathe_speedup", peer.speedup);
    item.set("lathe_speedup_lowest_round", peer.speedup_low);
    item.set("lathe_speedup_highest_round", peer.speedup_high);
    peers.push(item);
  }
  json.set("peers", peers);
  return json;
}

std::string format_bench_header() {
  char line[512];
  std::snprintf(line, sizeof line, "%-26s %-44s %10s %10s %10s %9s %8s %7s %-8s %s\n", "op", "shape (model)",
                "median ms", "min ms", "p80 ms", "GFLOP/s", "GB/s", "%roof", "bound", "dispatch / peers");
  return line;
}

std::string format_bench_row(const BenchRow& row) {
  std::string out;
  char line[512];
  std::string label = row.label.size() > 44 ? row.label.substr(0, 41) + "..." : row.label;
  bool implausible = row.roofline_percent > kImplausibleRooflinePercent;
  std::snprintf(line, sizeof line, "%-26s %-44s %10.3f %10.3f %10.3f %9.1f %8.1f %6.1f%%%s%-8s %s\n", row.op.c_str(),
                label.c_str(), row.timing.median * 1e3, row.timing.min * 1e3, row.timing.p80 * 1e3, row.gflops,
                row.gbytes, row.roofline_percent, implausible ? "!" : " ", row.bound.c_str(), row.dispatch.c_str());
  out += line;
  for (const auto& peer : row.peers) {
    std::snprintf(line, sizeof line,
                  "%-26s %-44s %10.3f %10.3f %10.3f %9.1f %8s %7s %-8s lathe %.2fx vs %s%s (rounds %.2f-%.2fx)\n",
                  ("  vs " + (peer.name.size() > 22 ? peer.name.substr(0, 19) + "..." : peer.name)).c_str(), "",
                  peer.timing.median * 1e3, peer.timing.min * 1e3,
                  peer.timing.p80 * 1e3, row.cost.flops / peer.timing.median / 1e9, "", "", "", peer.speedup,
                  peer.name.c_str(), peer.detail.empty() ? "" : (" [" + peer.detail + "]").c_str(), peer.speedup_low,
                  peer.speedup_high);
    out += line;
  }
  return out;
}

std::string bench_rows_to_svg(const std::vector<BenchRow>& rows, const std::string& title) {
  std::vector<PercentBar> bars;
  for (const BenchRow& row : rows) {
    PercentBar bar;
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
  return percent_bar_chart_svg(bars, title, "% of roofline (blue: compute-bound, orange: memory-bound)");
}

}  // namespace lathe
