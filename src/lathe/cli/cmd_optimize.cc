// `lathe optimize PROBLEM... [--report DIR] [--beam N] [--budget-s S] [--emit DIR]`: beam search
// over kernel schedules for the suite problems its kernel families cover: fusion problems, the plain
// matmul, row reductions and norms (src/lathe/tune/optimize/optimizer.h,
// docs/optimizer.md). Exit 0 when every problem got a kernel that passed the lab, 1 otherwise,
// 2 for bad input.
#include <cstdio>
#include <filesystem>

#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"
#include "lathe/io/durable_file.h"
#include "lathe/tune/optimize/kernel_family.h"
#include "lathe/tune/optimize/optimizer.h"

namespace lathe::cli {

int run_optimize(int argc, char** argv) {
  CommandLine command_line(
      "lathe optimize PROBLEM... [options]",
      "Finds a kernel for each suite problem it covers (`lathe optimize --list`: the fusion problems and\n"
      "the plain matmul large_gemm (fused-GEMM family: tile sizes per cache level, loop order, vector\n"
      "width, unroll, packing, epilogue fusion, threading axis), rms_norm, softmax and layer_norm (row\n"
      "family: vector width, unroll, one or two passes, exponentials kept or recomputed, threading split,\n"
      "non-temporal stores)) by beam search over schedules, no language model: a cost model over the measured peaks "
      "ranks each step's\n"
      "candidates, corrected by the times measured so far; every candidate is generated as C++, compiled,\n"
      "checked against the float64 reference and timed by the kernel lab (`lathe lab`) in its sandbox.\n"
      "The winner is judged again by the full lab beside lathe's path and the vendor. Results are cached\n"
      "per machine; exit 0 when every problem got a kernel that passed, 1 otherwise, 2 bad input.");
  add_runtime_options(command_line);
  command_line.positionals("PROBLEM", "suite problems the optimizer covers, or `all`");
  command_line.flag("list", "list the problems the optimizer covers, and exit");
  command_line.option("report", "DIR", "write DIR/optimize.json (trace, winners) and DIR/optimize.html (charts)");
  command_line.option("beam", "N", "schedules kept per search step", "3");
  command_line.option("per-step", "N", "candidates measured per step (0: 2 x beam)", "0");
  command_line.option("steps", "N", "search steps at most", "12");
  command_line.option("budget-s", "SECONDS", "search time per problem", "300");
  command_line.option("start", "SCHEDULE",
                      "start the search (or --check-space's walks) here instead of the naive start, e.g. a winner "
                      "of a related problem");
  command_line.flag("quick", "the problems' small --quick shapes (for tests)");
  command_line.flag("no-cache", "search even when the cache holds a winner for this machine");
  command_line.option("cache", "FILE",
                      "the optimizer's cache (default $LATHE_OPTIMIZE_CACHE or next to the tuning cache)");
  command_line.option(
      "emit", "DIR",
      "write each winner into DIR as a library kernel (src/lathe/bench/suite/found); it replaces the schedule of this "
      "machine's ISA tier (avx512 or avx2) and keeps the other tier's from the file already there");
  command_line.option("regenerate", "DIR",
                      "rewrite every library kernel in DIR under the schedules its header names, with the generator "
                      "as it is now (after a change to the generated code), and exit; no PROBLEM");
  command_line.option("print-source", "SCHEDULE", "print the generated source of PROBLEM under SCHEDULE, and exit");
  command_line.flag("library", "with --print-source: the library kernel (as --emit writes it), not the lab candidate");
  command_line.option("check-space", "N",
                      "check N schedules sampled from the space (random walks from the start) for correctness with "
                      "the lab at the --quick shape, over the given problems in turn, and exit (1 if any fails)");
  command_line.option("seed", "S", "the seed of --check-space", "1");
  command_line.flag("json", "print the JSON report on stdout");
  if (!command_line.parse(argc, argv)) return 0;
  apply_runtime_options(command_line);
  if (command_line.has("list")) {
    for (const auto& family : kernel_families())
      for (const auto& name : family.problems()) std::printf("%-40s %s\n", name.c_str(), family.name.c_str());
    return 0;
  }
  if (command_line.has("regenerate")) {
    for (const auto& path : regenerate_found_kernels(command_line.get("regenerate")))
      std::fprintf(stderr, "lathe optimize: wrote %s\n", path.c_str());
    return 0;
  }
  std::vector<std::string> problems = command_line.positional_values();
  LATHE_CHECK(!problems.empty(), "give at least one problem (`lathe optimize --list`), or `all`");
  if (problems.size() == 1 && problems.front() == "all") problems = optimizable_problems();
  for (const auto& problem : problems) family_of(problem);  // unknown names fail before any work
  if (command_line.has("print-source")) {
    LATHE_CHECK(problems.size() == 1, "--print-source takes one problem");
    std::printf(
        "%s", optimize_source(problems.front(), command_line.get("print-source"), command_line.has("library")).c_str());
    return 0;
  }
  if (command_line.has("check-space")) {
    int failures = 0;
    const std::string start = command_line.has("start") ? command_line.get("start") : "";
    for (const auto& sample :
         check_schedule_sample(problems, command_line.get_int("check-space"),
                               static_cast<uint64_t>(command_line.get_int("seed")), LabLimits{}, start)) {
      failures += sample.verdict != "pass";
      std::printf("%-36s %-14s %s%s\n", sample.problem.c_str(), sample.verdict.c_str(), sample.key.c_str(),
                  sample.detail.empty() ? "" : (" (" + sample.detail + ")").c_str());
    }
    return failures == 0 ? 0 : 1;
  }
  OptimizeOptions options;
  options.search.beam = command_line.get_int("beam");
  options.search.per_step = command_line.get_int("per-step");
  options.search.max_steps = command_line.get_int("steps");
  options.search.budget_seconds = command_line.get_double("budget-s");
  LATHE_CHECK(options.search.beam >= 1 && options.search.per_step >= 0 && options.search.max_steps >= 0 &&
                  options.search.budget_seconds > 0,
              "--beam must be at least 1, --per-step and --steps at least 0, --budget-s positive");
  options.quick = command_line.has("quick");
  if (command_line.has("start")) {
    options.search.start = command_line.get("start");
    for (const auto& problem : problems)  // a schedule outside a problem's space fails before any work
      make_kernel_space(problem, optimize_shape(problem, options.quick), schedule_limits_for_this_machine())
          ->parse(options.search.start);
  }
  options.use_cache = !command_line.has("no-cache");
  if (command_line.has("cache")) options.cache_path = command_line.get("cache");

  const std::string cpu = str_cat(cpu_features().model, ", ", isa_name(active_isa()));
  std::fprintf(stderr, "lathe optimize: measuring the machine's peaks (one set for the whole report)\n");
  MachinePeaks peaks = measure_machine_peaks(options.quick);
  std::vector<ProblemOptimization> results;
  for (const auto& problem : problems) {
    std::fprintf(stderr, "lathe optimize: %s\n", problem.c_str());
    results.push_back(optimize_problem(problem, options, peaks));
    if (command_line.has("emit") && results.back().winner_passed) {
      try {
        for (const auto& path : emit_found_kernel(results.back(), command_line.get("emit")))
          std::fprintf(stderr, "lathe optimize: wrote %s\n", path.c_str());
      } catch (const Error& error) {  // a family without promotion: the search's result still stands
        std::fprintf(stderr, "%s (not emitted)\n", error.what());
      }
    }
  }
  // One set of peaks for every figure: the search may have raised them (optimizer.h).
  for (auto& result : results)
    if (!result.final_report.paths.empty()) apply_lab_peaks(result.final_report, peaks);
  if (command_line.has("report")) {
    const std::string dir = command_line.get("report");
    std::filesystem::create_directories(dir);
    write_file_atomically(dir + "/optimize.json", optimization_json(results, peaks, cpu).dump(2) + "\n");
    write_file_atomically(dir + "/optimize.html", optimization_html(results, peaks, cpu));
    std::fprintf(stderr, "lathe optimize: wrote %s/optimize.json and %s/optimize.html\n", dir.c_str(), dir.c_str());
  }
  if (command_line.has("json"))
    std::printf("%s\n", optimization_json(results, peaks, cpu).dump(2).c_str());
  else
    std::printf("%s(%s)\n", format_optimization_table(results).c_str(), cpu.c_str());
  bool all_passed = true;
  for (const auto& result : results) all_passed = all_passed && result.winner_passed;
  return all_passed ? 0 : 1;
}

}  // namespace lathe::cli
