#include "lathe/cli/bench_suite.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "lathe/bench/suite/suite_compare.h"
#include "lathe/bench/suite/suite_judge.h"
#include "lathe/bench/suite/suite_report.h"
#include "lathe/bench/timing.h"
#include "lathe/bench/vendor_setup.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/core/version.h"

namespace lathe::cli {

void add_suite_options(CommandLine& command_line) {
  command_line.flag("suite",
                    "run the kernel benchmark suite (50+ problems) instead of op rows; OP... then filters "
                    "problems by name, name substring or family (llm, fusion)");
  command_line.flag("list", "with --suite: list the problems and exit");
  command_line.flag("cold", "with --suite: cache-cold timing (rotate copies of the input and output buffers)");
  command_line.option("compare", "FILE", "with --suite: compare with a baseline report; exit 1 on any regression");
  command_line.option("noise-floor", "FRACTION", "with --compare: smallest relative slowdown counted as a regression",
                      "0.05");
  command_line.option("html", "FILE", "with --suite: write a self-contained HTML report (table + chart)");
  command_line.option("sets", "N", "with --suite: fresh random input sets per problem", "5");
  command_line.option("seed", "N", "with --suite: seed of the input sets", "1");
}

namespace {

std::vector<const SuiteEntry*> select_entries(const std::vector<std::string>& filters) {
  std::vector<const SuiteEntry*> selected;
  for (const auto& entry : suite_entries()) {
    bool wanted = filters.empty();
    for (const auto& filter : filters)
      wanted = wanted || entry.family == filter || entry.name.find(filter) != std::string::npos;
    if (wanted) selected.push_back(&entry);
  }
  for (const auto& filter : filters) {
    bool matched = std::any_of(suite_entries().begin(), suite_entries().end(), [&](const SuiteEntry& entry) {
      return entry.family == filter || entry.name.find(filter) != std::string::npos;
    });
    LATHE_CHECK(matched, "no suite problem matches '", filter, "' (see `lathe bench --suite --list`)");
  }
  return selected;
}

Json read_baseline(const std::string& path) {
  std::ifstream file(path);
  LATHE_CHECK(file.good(), "cannot read baseline ", path);
  std::stringstream text;
  text << file.rdbuf();
  try {
    return Json::parse(text.str());
  } catch (const Error& error) {
    throw_error("baseline ", path, " is not valid JSON: ", error.what());
  }
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  LATHE_CHECK(file.good(), "cannot write ", path);
  file << text;
}

std::string describe_caches(const MachinePeaks& peaks) {
  std::string text;
  for (const auto& level : peaks.caches)
    text += str_cat(text.empty() ? "" : ", ", level.name, " ", level.bytes_per_thread >> 10, " KiB/thread ",
                    static_cast<int>(level.gbytes + 0.5), " GB/s");
  return text.empty() ? "none known" : text + " (sizes from " + peaks.cache_source + ")";
}

}  // namespace

int run_bench_suite(const CommandLine& command_line) {
  std::vector<const SuiteEntry*> entries = select_entries(command_line.positional_values());
  bool quick = command_line.has("quick");
  if (command_line.has("list")) {
    for (const SuiteEntry* entry : entries) {
      auto problem = entry->make(quick);
      const SuiteInfo& info = problem->info();
      std::printf("%-38s %-6s %s\n    shape: %s\n    model: %s\n    lathe: %s\n    vendor: %s\n", info.name.c_str(),
                  info.family.c_str(), info.summary.c_str(), problem->shape_text().c_str(), info.model.c_str(),
                  info.lathe_path.c_str(), info.vendor.empty() ? "none" : info.vendor.c_str());
    }
    return 0;
  }
  SuiteOptions options;
  options.correctness_sets = command_line.get_int("sets");
  LATHE_CHECK(options.correctness_sets >= 1, "--sets must be at least 1, got ", options.correctness_sets);
  options.seed = static_cast<uint64_t>(command_line.get_int("seed"));
  options.cold = command_line.has("cold");
  if (quick) options.warmup_runs = 1, options.blocks = 1, options.runs_per_block = 3;
  double noise_floor = command_line.get_double("noise-floor");
  LATHE_CHECK(noise_floor >= 0 && noise_floor < 10, "--noise-floor must be a fraction like 0.05, got ", noise_floor);
  Json baseline;
  if (command_line.has("compare")) baseline = read_baseline(command_line.get("compare"));
  bool json_output = command_line.has("json");

  MachinePeaks peaks_start = measure_machine_peaks(quick);
  if (!json_output) {
    std::printf(
        "lathe bench --suite on %s, %d threads, active ISA %s, %s caches, %d input sets per problem\n"
        "vendors on: %s\n"
        "progress (times only: the roofline columns come in the final table, from the peaks measured at the "
        "start and the end)\n\n%s",
        cpu_features().model.c_str(), num_threads(), isa_name(active_isa()), options.cold ? "cold" : "warm",
        options.correctness_sets, vendor_isa_summary().c_str(), format_suite_progress_header().c_str());
    std::fflush(stdout);
  }
  std::vector<SuiteResult> results;
  double start = now_seconds();
  for (const SuiteEntry* entry : entries) {
    auto problem = entry->make(quick);
    results.push_back(judge_problem(*problem, peaks_start, options));
    if (!json_output) {
      std::printf("%s", format_suite_progress_row(results.back()).c_str());
      std::fflush(stdout);
    }
  }
  double elapsed = now_seconds() - start;
  MachinePeaks peaks_end = measure_machine_peaks(quick);
  // The one set of peaks of every figure below: the higher of start and end, each figure on its own.
  SuiteReport suite_report = make_suite_report(std::move(results), higher_peaks(peaks_start, peaks_end));
  const MachinePeaks& peaks = suite_report.peaks;

  Json run = Json::object();
  run.set("cpu", cpu_features().model);
  run.set("threads", num_threads());
  run.set("lathe_version", lathe_version());
  run.set("lathe_commit", lathe_git_commit());
  run.set("active_isa", isa_name(active_isa()));
  run.set("quick", quick);
  run.set("cache_mode", options.cold ? "cold" : "warm");
  run.set("correctness_sets", options.correctness_sets);
  run.set("seed", static_cast<int64_t>(options.seed));
  run.set("timing", str_cat(options.warmup_runs, " warm-up + ", options.blocks, " interleaved blocks x ",
                            options.runs_per_block, " runs (lathe, vendor); reference: one run per input set"));
  run.set("seconds", elapsed);
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  run.set("omp_wait_policy", wait_policy ? wait_policy : "");
  run.set("vendors_on", vendor_isa_summary());  // "oneDNN avx2, OpenBLAS Haswell" under --isa avx2
  run.set("peaks_start", peaks_start.to_json());
  run.set("peaks_end", peaks_end.to_json());
  Json report = suite_report_json(suite_report, run);

  if (!json_output) {
    std::printf(
        "\npeaks used for every figure below (higher of start and end): f32 %.1f GFLOP/s, DRAM %.1f GB/s (copy "
        "%.1f, stream %.1f), caches: %s; memory floors use %s; %.0f s\n\n%s\n%s",
        peaks.f32_gflops, peaks.memory_gbytes(0, true), peaks.copy_gbytes, peaks.dram_stream_gbytes,
        describe_caches(peaks).c_str(),
        options.cold ? "DRAM (cold timing)" : "the smallest level the working set per thread fits in", elapsed,
        format_suite_table(suite_report).c_str(), format_suite_summary(suite_report.summary).c_str());
    std::printf("furthest from the roofline (the next kernels to write):");
    for (const SuiteResult* result : furthest_from_roofline(suite_report.results, 5))
      std::printf(" %s (%.1f%%)", result->info.name.c_str(), result->roofline_percent);
    std::printf("\n");
  }
  std::string title = str_cat("lathe kernel suite on ", cpu_features().model, ", ", num_threads(), " threads, ",
                              isa_name(active_isa()), quick ? " (--quick)" : "");
  if (command_line.has("output")) write_file(command_line.get("output"), report.dump(2) + "\n");
  if (command_line.has("svg")) write_file(command_line.get("svg"), suite_to_svg(suite_report.results, title));
  if (command_line.has("html")) write_file(command_line.get("html"), suite_to_html(suite_report, title));
  if (json_output) std::printf("%s\n", report.dump(2).c_str());

  int exit_code = 0;
  const std::vector<SuiteResult>& final_results = suite_report.results;
  bool any_wrong = std::any_of(final_results.begin(), final_results.end(), [](const SuiteResult& result) {
    return !result.correct || (!result.info.vendor.empty() && !result.vendor_correct);
  });
  if (any_wrong) {
    std::fprintf(stderr, "lathe bench --suite: some problems (or vendor baselines) are wrong; see the table\n");
    exit_code = 1;
  }
  if (command_line.has("compare")) {
    auto comparisons = compare_with_baseline(final_results, baseline, noise_floor);
    std::printf("\ncompared with %s:\n%s", command_line.get("compare").c_str(), format_comparison(comparisons).c_str());
    if (std::any_of(comparisons.begin(), comparisons.end(), [](const SuiteComparison& c) { return c.regressed(); }))
      exit_code = 1;
  }
  return exit_code;
}

}  // namespace lathe::cli
