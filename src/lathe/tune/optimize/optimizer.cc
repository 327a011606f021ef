#include "lathe/tune/optimize/optimizer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "lathe/bench/suite/suite_problem.h"
#include "lathe/bench/timing.h"
#include "lathe/io/durable_file.h"
#include "lathe/tune/optimize/fused_gemm_generator.h"
#include "lathe/tune/optimize/kernel_family.h"
#include "lathe/tune/tuning_cache.h"

namespace lathe {

namespace {

const SuiteEntry& suite_entry(const std::string& name) {
  for (const auto& entry : suite_entries())
    if (entry.name == name) return entry;
  throw_error("no suite problem named '", name, "'");
}

std::string write_source(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::ofstream file(path);
  file << text;
  LATHE_CHECK(file.good(), "lathe optimize: cannot write ", path);
  return path;
}

LabOptions lab_options(const std::string& problem, const std::string& source, const OptimizeOptions& options,
                       const MachinePeaks& peaks, bool final) {
  LabOptions lab;
  lab.problem = problem;
  lab.candidate = source;
  lab.quick = options.quick;
  lab.limits = options.limits;
  lab.peaks = peaks;
  lab.object_cache_dir =
      std::filesystem::path(options.cache_path.empty() ? default_optimize_cache_path() : options.cache_path)
          .parent_path()
          .string() +
      "/optimize-objects";
  if (!final) {  // the search: one fresh set and one hidden shape, the candidate timed alone
    lab.sets = 1;
    lab.hidden_shapes = 1;
    lab.time_peers = false;
    lab.timing.warmup_runs = 1, lab.timing.blocks = 2, lab.timing.runs_per_block = 5;
  } else if (options.quick) {
    lab.timing.warmup_runs = 1, lab.timing.blocks = 2, lab.timing.runs_per_block = 5;
  }
  return lab;
}

std::string cache_file(const OptimizeOptions& options) {
  return options.cache_path.empty() ? default_optimize_cache_path() : options.cache_path;
}

}  // namespace

std::string default_optimize_cache_path() {
  if (const char* env = std::getenv("LATHE_OPTIMIZE_CACHE"); env && *env) return env;
  return (std::filesystem::path(default_tuning_cache_path()).parent_path() / "optimize.json").string();
}

std::string optimize_shape(const std::string& problem, bool quick) {
  family_of(problem);  // an uncovered name fails with the list
  return suite_entry(problem).make(quick)->shape_text();
}

std::string optimize_source(const std::string& problem, const std::string& schedule, bool library_mode) {
  auto space = make_kernel_space(problem, optimize_shape(problem, false), schedule_limits_for_this_machine());
  return space->source(space->parse(schedule), library_mode);
}

ProblemOptimization optimize_problem(const std::string& problem, const OptimizeOptions& options, MachinePeaks& peaks) {
  ProblemOptimization result;
  result.problem = problem;
  result.shape = optimize_shape(problem, options.quick);
  const std::unique_ptr<KernelSpace> space =
      make_kernel_space(problem, result.shape, schedule_limits_for_this_machine());
  result.hand_tuned_op = space->hand_tuned_op();
  char pattern[] = "/tmp/lathe-optimize-XXXXXX";
  LATHE_CHECK(mkdtemp(pattern) != nullptr, "cannot create a work directory in /tmp");
  const std::string work = pattern;

  // The per-machine cache: a winner found before on this CPU, feature set and thread count.
  std::string warning;
  TuningCache cache = TuningCache::load(cache_file(options), &warning);
  if (!warning.empty()) std::fprintf(stderr, "lathe optimize: %s\n", warning.c_str());
  if (options.use_cache)
    for (const auto& entry : cache.entries())
      if (entry.op == "optimize" && entry.impl == problem && entry.shape == result.shape &&
          entry.matches_this_machine()) {
        Schedule schedule{entry.config};
        if (space->valid(schedule)) result.from_cache = true, result.found = true, result.winner = schedule;
      }

  double started = now_seconds();
  int counter = 0;
  MeasureFn measure = [&](const Schedule& schedule) {
    std::string source = write_source(work, str_cat("candidate_", counter++, ".cc"), space->source(schedule, false));
    LabReport report = run_kernel_lab(lab_options(problem, source, options, peaks, false));
    if (report.verdict == LabVerdict::too_fast) {
      // Peaks measured while the machine was busy set the floor too high: measure again, keep the
      // higher figures (for every later candidate and the report too), and judge once more.
      peaks = higher_peaks(peaks, measure_machine_peaks(options.quick));
      report = run_kernel_lab(lab_options(problem, source, options, peaks, false));
    }
    SearchMeasurement measurement;
    measurement.verdict = lab_verdict_name(report.verdict);
    measurement.detail = report.detail;
    measurement.passed = report.verdict == LabVerdict::pass && !report.paths.empty();
    measurement.compiled = !report.compile_cached;
    if (measurement.passed) measurement.seconds = report.paths.front().timing.median;
    if (options.verbose)
      std::fprintf(stderr, "  %-32s %-16s %10.4f ms %s\n", problem.c_str(), measurement.verdict.c_str(),
                   measurement.seconds * 1e3, schedule.key().c_str());
    return measurement;
  };
  if (!result.from_cache) {
    PredictFn predict = [&](const Schedule& schedule) { return space->predict_seconds(schedule, peaks); };
    result.trace = beam_search(*space, predict, measure, options.search, now_seconds);
    result.found = result.trace.found;
    result.winner = result.trace.best;
    result.winner_passed = result.trace.found;
    result.winner_seconds = result.trace.best_seconds;
  }
  result.search_seconds = now_seconds() - started;
  if (result.found) {
    result.winner_source = space->source(result.winner, false);
    if (options.final_lab) {
      std::string source = write_source(work, "winner.cc", result.winner_source);
      result.final_report = run_kernel_lab(lab_options(problem, source, options, peaks, true));
      result.winner_passed = result.final_report.verdict == LabVerdict::pass;
      for (const auto& path : result.final_report.paths) {
        if (path.path == "candidate") result.winner_seconds = path.timing.median;
        if (path.path == "lathe") result.lathe_seconds = path.timing.median;
        if (path.path == "vendor") result.vendor_seconds = path.timing.median;
      }
    }
    if (result.winner_passed && !result.from_cache) {
      TuningEntry entry = tuning_entry_for_this_machine("optimize", problem, result.shape);
      entry.config = result.winner.params;
      entry.median_seconds = result.winner_seconds;
      if (!result.trace.candidates.empty() && result.trace.candidates.front().measurement.passed)
        entry.heuristic_median_seconds = result.trace.candidates.front().measurement.seconds;
      cache.upsert(entry);
      std::error_code ignored;
      std::filesystem::create_directories(std::filesystem::path(cache_file(options)).parent_path(), ignored);
      cache.save(cache_file(options));
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(work, ignored);
  return result;
}

std::vector<ScheduleSample> check_schedule_sample(const std::vector<std::string>& problems, int count, uint64_t seed,
                                                  const LabLimits& limits, const std::string& start) {
  LATHE_CHECK(!problems.empty() && count >= 0, "check_schedule_sample: give problems and a count >= 0");
  const ScheduleLimits space_limits = schedule_limits_for_this_machine();
  std::mt19937_64 random(seed);
  char pattern[] = "/tmp/lathe-optimize-XXXXXX";
  LATHE_CHECK(mkdtemp(pattern) != nullptr, "cannot create a work directory in /tmp");
  std::vector<ScheduleSample> samples;
  for (int i = 0; i < count; ++i) {
    const std::string& problem = problems[static_cast<size_t>(i) % problems.size()];
    const auto space = make_kernel_space(problem, optimize_shape(problem, true), space_limits);
    Schedule schedule = start.empty() ? space->naive() : space->parse(start);
    const int walk = start.empty() ? 8 : i / static_cast<int>(problems.size()) % 4;  // the start itself first
    for (int step = 0; step < walk; ++step) {
      std::vector<SpaceMove> moves = space->moves(schedule);
      if (moves.empty()) break;
      schedule = moves[random() % moves.size()].schedule;
    }
    LabOptions lab;
    lab.problem = problem;
    lab.candidate = write_source(pattern, str_cat("sample_", i, ".cc"), space->source(schedule, false));
    lab.quick = true;
    lab.sets = 1;
    lab.hidden_shapes = 1;
    lab.time = false;
    lab.limits = limits;
    LabReport report = run_kernel_lab(lab);
    samples.push_back({problem, schedule.key(), lab_verdict_name(report.verdict), report.detail});
  }
  std::error_code ignored;
  std::filesystem::remove_all(pattern, ignored);
  return samples;
}

namespace {

constexpr const char* kFoundPrefix = "found_";
constexpr const char* kFoundSuffix = "_kernels.cc";

// The repository's style where clang-format is installed (it finds the repository's .clang-format).
void format_source(const std::string& path) {
  if (std::system("command -v clang-format > /dev/null 2>&1") == 0)
    (void)std::system(("clang-format -i '" + path + "'").c_str());
}

// The problems of the found kernels DIR holds (found_<problem>_kernels.cc), sorted.
std::vector<std::string> found_kernel_problems(const std::string& dir) {
  std::vector<std::string> names;
  const std::string prefix = kFoundPrefix, suffix = kFoundSuffix;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    std::string name = file.path().filename().string();
    if (name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      names.push_back(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Rewrites DIR/found_kernel_list.inc from the kernels DIR holds; returns its path.
std::string write_found_kernel_list(const std::string& dir) {
  std::string list =
      "// Written by `lathe optimize --emit`: the found kernels of this folder, one LATHE_FOUND_KERNEL(problem)\n"
      "// per found_<problem>_kernels.cc (found_kernel_registry.cc expands the list).\n";
  for (const auto& name : found_kernel_problems(dir)) list += "LATHE_FOUND_KERNEL(" + name + ")\n";
  return write_source(dir, "found_kernel_list.inc", list);
}

}  // namespace

std::vector<std::string> emit_found_kernel(const ProblemOptimization& result, const std::string& dir) {
  LATHE_CHECK(result.found && result.winner_passed, "lathe optimize --emit: no kernel for ", result.problem,
              " passed the lab, nothing to emit");
  std::filesystem::create_directories(dir);
  std::vector<std::string> written;
  // The file as it is (a kernel keeps the schedules of the ISA tiers this machine did not search).
  const std::string file_name = kFoundPrefix + result.problem + kFoundSuffix;
  const std::string existing_path = (std::filesystem::path(dir) / file_name).string();
  const std::string existing = std::filesystem::exists(existing_path) ? read_file_contents(existing_path) : "";
  std::string source = make_kernel_space(result.problem, result.shape, schedule_limits_for_this_machine())
                           ->library_source(result.winner, existing);
  written.push_back(write_source(dir, file_name, source));
  format_source(written.back());
  written.push_back(write_found_kernel_list(dir));
  return written;
}

std::vector<std::string> regenerate_found_kernels(const std::string& dir) {
  LATHE_CHECK(std::filesystem::is_directory(dir), "lathe optimize --regenerate: ", dir, " is not a folder");
  std::vector<std::string> written;
  for (const auto& problem : found_kernel_problems(dir)) {
    const std::string file_name = kFoundPrefix + problem + kFoundSuffix;
    const std::string existing = read_file_contents((std::filesystem::path(dir) / file_name).string());
    const LibrarySchedules tiers = parse_library_schedules(existing);
    LATHE_CHECK(tiers.wide || tiers.narrow, "lathe optimize --regenerate: ", file_name, " names no schedule");
    written.push_back(
        write_source(dir, file_name, generate_fused_gemm_library_source(fused_gemm_kernel(problem), tiers)));
    format_source(written.back());
  }
  written.push_back(write_found_kernel_list(dir));
  return written;
}

}  // namespace lathe
