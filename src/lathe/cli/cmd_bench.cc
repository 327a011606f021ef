// `lathe bench`: the op benchmark (the project's main job until the trainer exists).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>

#include "lathe/bench/op_bench.h"
#include "lathe/bench/vendor_setup.h"
#include "lathe/cli/bench_suite.h"
#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/core/version.h"

namespace lathe::cli {

static std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

int run_bench(int argc, char** argv) {
  if (argc >= 1 && std::string(argv[0]) == "train") return run_bench_train(argc - 1, argv + 1);
  if (argc >= 1 && std::string(argv[0]) == "moe-layer") return run_bench_moe_layer(argc - 1, argv + 1);
  CommandLine command_line(
      "lathe bench [OP...] [options]\n       lathe bench train [CONFIG] [KEY=VALUE...] [options]   (see lathe bench "
      "train --help)\n"
      "       lathe bench moe-layer [MODEL...] [options]   (MoE layer fwd+bwd vs its grouped GEMMs; see --help)\n"
      "       lathe bench --suite [PROBLEM...] [--quick] [--cold] [--compare FILE] "
      "[--html FILE]",
      "Times ops at shapes taken from real models (see `lathe ops NAME`) through the same dispatch\n"
      "training uses (pinned > tuned > heuristic). Each row: median, min and p80 time, GFLOP/s, GB/s\n"
      "and % of the roofline from peaks measured at the start of the run; peers (oneDNN, OpenBLAS)\n"
      "run on the same inputs in the same process, with lathe's thread count and instruction set\n"
      "(--isa caps them too), in blocks interleaved with lathe's; the ratio printed is the median\n"
      "over rounds of the two blocks' medians, so a busy minute on a shared machine hits both.\n"
      "--vs-config times another config of lathe's own the same way (an A/B of a blocking change).\n"
      "Without OP, every op.\n"
      "With --suite: the kernel benchmark suite instead (53 problems judged on correctness over 5\n"
      "input sets, speed against the plain reference and oneDNN/OpenBLAS, rooflines, fast_p and\n"
      "regressions against a baseline; see docs/bench_suite.md); OP... then filters its problems.");
  add_runtime_options(command_line);
  command_line.positionals("OP...", "ops to benchmark (default: all)");
  command_line.repeated("shape", "K=V,...", "benchmark this shape instead of the op's model shapes");
  command_line.option("impl", "NAME", "time one implementation with its heuristic config instead of dispatch");
  command_line.option("vs", "PEERS", "comma-separated peers to compare with, or 'none'", "onednn,openblas");
  command_line.flag("json", "print the report as JSON");
  command_line.option("output", "FILE", "also write the JSON report to FILE");
  command_line.option("svg", "FILE", "also write an SVG chart of % of roofline per row");
  command_line.repeated("vs-config", "OP:IMPL:K=V,...",
                        "also time this config of lathe's own (the --pin format) beside the dispatched path, "
                        "interleaved like a peer");
  command_line.flag("quick", "first shape per op, fewer runs (a smoke test, not a measurement)");
  command_line.option("min-time", "SECONDS", "minimum timed seconds per row", "0.5");
  add_suite_options(command_line);
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  if (command_line.has("suite")) return run_bench_suite(command_line);

  std::vector<const OpRegistration*> ops;
  if (command_line.positional_values().empty()) {
    for (const auto& op : all_ops()) ops.push_back(&op);
  } else {
    for (const auto& name : command_line.positional_values()) ops.push_back(&find_op(name));
  }
  for (const auto& shape : command_line.get_all("shape")) ShapeSpec::parse(shape);  // fail early on typos

  BenchOptions options;
  options.impl = command_line.get("impl");
  if (command_line.get("vs") != "none") options.peers = split_commas(command_line.get("vs"));
  for (const auto& peer : options.peers)
    LATHE_CHECK(peer == "onednn" || peer == "openblas", "unknown peer '", peer, "' (known: onednn, openblas, none)");
  for (const auto& text : command_line.get_all("vs-config")) {
    options.configs.push_back(RivalConfig::parse(text));
    find_op(options.configs.back().op);  // fail early on typos
  }
  options.timing.min_seconds = command_line.get_double("min-time");
  bool quick = command_line.has("quick");
  if (quick) options.timing = TimingOptions{1, 3, 20, 0.02}, options.max_seconds_per_row = 0.5;
  bool json_output = command_line.has("json");

  // Peaks are measured before and after the rows and the higher is used: on a shared machine a
  // single low measurement would make every row look better than it is.
  MachinePeaks peaks_before = measure_machine_peaks(quick);
  if (!json_output)
    std::printf(
        "lathe bench on %s, %d threads, active ISA %s\npeaks (start): f32 %.1f GFLOP/s, bf16 %.1f GFLOP/s, AMX %.1f "
        "GFLOP/s, "
        "copy %.1f GB/s\n%s\n%s",
        cpu_features().model.c_str(), num_threads(), isa_name(active_isa()), peaks_before.f32_gflops,
        peaks_before.bf16_gflops, peaks_before.amx_gflops, peaks_before.copy_gbytes,
        options.peers.empty() ? "" : ("peers on: " + vendor_isa_summary() + "\n").c_str(),
        format_bench_header().c_str());

  std::vector<BenchRow> rows;
  for (const OpRegistration* op : ops) {
    std::vector<NamedShape> shapes;
    for (const auto& shape : command_line.get_all("shape")) shapes.push_back({"--shape " + shape, shape});
    if (shapes.empty()) shapes = op->bench_shapes;
    if (quick && shapes.size() > 1) shapes.resize(1);
    for (const auto& shape : shapes) {
      auto problem = op->make_problem(ShapeSpec::parse(shape.shape), 1);
      if (!options.impl.empty()) {
        auto impls = problem->impl_names();
        if (std::find(impls.begin(), impls.end(), options.impl) == impls.end()) continue;
      }
      rows.push_back(bench_problem(*problem, shape.label, shape.shape, peaks_before, options));
      if (!json_output) {
        std::printf("%s", format_bench_row(rows.back()).c_str());
        std::fflush(stdout);
      }
    }
  }
  MachinePeaks peaks_after = measure_machine_peaks(quick);
  MachinePeaks peaks = higher_peaks(peaks_before, peaks_after);
  int implausible = 0;
  std::vector<double> streamed_percent;  // what the streamed rows printed (start peaks)
  for (auto& row : rows) {
    streamed_percent.push_back(row.roofline_percent);
    apply_roofline(row, peaks);
    implausible += row.roofline_percent > kImplausibleRooflinePercent;
  }
  if (!json_output) {
    std::printf("\npeaks (end): f32 %.1f GFLOP/s, copy %.1f GB/s", peaks_after.f32_gflops, peaks_after.copy_gbytes);
    if (peaks_after.f32_gflops > 1.2 * peaks_before.f32_gflops ||
        peaks_before.f32_gflops > 1.2 * peaks_after.f32_gflops)
      std::printf(" (they differ by over 20%%: the machine's capacity changed during the run)");
    // The streamed rows could only use the start peaks; the report's figures use the higher of
    // start and end, so the rows whose % of roofline that changed are listed again.
    bool moved = false;
    for (size_t i = 0; i < rows.size(); ++i)
      moved = moved || std::abs(rows[i].roofline_percent - streamed_percent[i]) > 0.05;
    if (!moved) {
      std::printf(".\n%% of roofline above: the same against the higher of start and end.\n");
    } else {
      std::printf(
          ".\nFinal %% of roofline, against the higher of start and end (as in the JSON report and --svg; the "
          "rows above used the start peaks):\n");
      for (size_t i = 0; i < rows.size(); ++i)
        std::printf("  %-26s %-46s %6.1f%% %s (streamed %.1f%%)\n", rows[i].op.c_str(),
                    rows[i].label.substr(0, 46).c_str(), rows[i].roofline_percent, rows[i].bound.c_str(),
                    streamed_percent[i]);
    }
    if (implausible)
      std::printf(
          "%d row(s) above 100%% of the roofline even so (marked in JSON as beyond_roofline): a cost model "
          "counts too little or the peaks were measured low; do not read them as speedups.\n",
          implausible);
  }
  Json report = Json::object();
  report.set("cpu", cpu_features().model);
  report.set("threads", num_threads());
  report.set("lathe_version", lathe_version());
  report.set("lathe_commit", lathe_git_commit());
  report.set("active_isa", isa_name(active_isa()));
  report.set("peers_on", vendor_isa_summary());  // "oneDNN avx2, OpenBLAS Haswell": what the peer rows ran on
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");  // PASSIVE unless the user chose (cli/main.cc)
  report.set("omp_wait_policy", wait_policy ? wait_policy : "");
  const char* openblas_timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT");  // 4 unless the user chose
  report.set("openblas_thread_timeout", openblas_timeout ? openblas_timeout : "");
  report.set("peaks", peaks.to_json());
  report.set("peaks_start", peaks_before.to_json());
  report.set("peaks_end", peaks_after.to_json());
  Json json_rows = Json::array();
  for (const auto& row : rows) json_rows.push(bench_row_to_json(row));
  report.set("rows", json_rows);
  if (command_line.has("output")) {
    std::ofstream file(command_line.get("output"));
    LATHE_CHECK(file.good(), "cannot write ", command_line.get("output"));
    file << report.dump(2) << "\n";
  }
  if (command_line.has("svg")) {
    std::ofstream file(command_line.get("svg"));
    LATHE_CHECK(file.good(), "cannot write ", command_line.get("svg"));
    file << bench_rows_to_svg(rows, str_cat("lathe bench on ", cpu_features().model, ", ", num_threads(), " threads, ",
                                            isa_name(active_isa())));
  }
  if (json_output) std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

}  // namespace lathe::cli
