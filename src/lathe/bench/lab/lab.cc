#include "lathe/bench/lab/lab.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <sstream>

#include "lathe/bench/lab/lab_task.h"
#include "lathe/bench/suite/suite_report.h"
#include "lathe/bench/timing.h"
#include "lathe/bench/vendor_setup.h"
#include "lathe/core/parallel.h"

namespace lathe {

namespace {

// A verdict that ends the evaluation early.
struct LabFailure {
  LabVerdict verdict;
  std::string detail;
};

const SuiteEntry& find_entry(const std::string& name) {
  std::string names;
  for (const auto& entry : suite_entries()) {
    if (entry.name == name) return entry;
    names += (names.empty() ? "" : ", ") + entry.name;
  }
  throw_error("no suite problem named '", name, "'; the problems are: ", names);
}

std::unique_ptr<SuiteProblem> make_problem(const SuiteEntry& entry, bool quick) {
  auto problem = entry.make(quick);
  LATHE_CHECK(!problem->named_inputs().empty(), "'", entry.name,
              "' is an op's own problem, whose inputs the lab cannot hand to a candidate yet; choose a composition "
              "problem (the fusion, MoE, recurrent and attention compositions)");
  return problem;
}

uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

// The task and data files of one run: the problem's live inputs, NaN outputs.
LabTask write_run_files(SuiteProblem& problem, const std::string& dir) {
  problem.prepare_run();
  LabTask task = make_lab_task(problem.named_inputs(), problem.outputs(), problem.shape_text(), num_threads());
  std::ofstream(dir + "/task.json") << task.to_json().dump(2);
  std::vector<char> data(static_cast<size_t>(task.total_bytes), 0);
  auto inputs = problem.named_inputs();
  for (size_t i = 0; i < inputs.size(); ++i)
    std::memcpy(data.data() + task.inputs[i].offset, inputs[i].second.data, task.inputs[i].bytes);
  for (const auto& slot : task.outputs) std::memset(data.data() + slot.offset, 0xff, slot.bytes);  // NaN
  std::ofstream file(dir + "/data.bin", std::ios::binary | std::ios::trunc);
  file.write(data.data(), static_cast<std::streamsize>(data.size()));
  LATHE_CHECK(file.good(), "lathe lab: cannot write ", dir, "/data.bin");
  return task;
}

// The candidate's outputs, read back from the data file and judged by the suite's rule.
LabFailure judge_outputs(SuiteProblem& problem, const LabTask& task, const ReferenceOutputs& references,
                         const std::string& dir) {
  std::ifstream file(dir + "/data.bin", std::ios::binary);
  for (size_t i = 0; i < task.outputs.size(); ++i) {
    const LabTensorSlot& slot = task.outputs[i];
    Tensor output = Tensor::empty(slot.shape, slot.dtype);
    file.seekg(slot.offset);
    file.read(static_cast<char*>(output.view().data), slot.bytes);
    OutputCheck check = compare_output(slot.name, output.view(), references.exact[i].view(), references.naive[i].view(),
                                       problem.tolerance(slot.name));
    if (!check.passed) {
      CheckResult result;
      result.outputs.push_back(check);
      return {check.nan_count > 0 ? LabVerdict::nan : LabVerdict::wrong, describe_check_failure(result)};
    }
  }
  return {LabVerdict::pass, ""};
}

std::string signal_text(int signal) {
  const char* name = sigabbrev_np(signal);
  return str_cat("killed by SIG", name ? name : std::to_string(signal).c_str(), " (", strsignal(signal), ")");
}

// What a worker's end means for the candidate.
LabFailure verdict_of_exit(const LabExit& exit, const LabLimits& limits) {
  std::string said = exit.stderr_text;
  while (!said.empty() && said.back() == '\n') said.pop_back();
  std::string tail = said.empty() ? "" : ": " + said;
  if (exit.timed_out) return {LabVerdict::timeout, str_cat("no result within ", limits.wall_seconds, " s (killed)")};
  if (exit.signal == SIGXCPU || exit.signal == SIGKILL)
    return {LabVerdict::timeout,
            str_cat(signal_text(exit.signal), ": over the CPU-time limit of ", limits.cpu_seconds, " s")};
  if (exit.signal != 0) return {LabVerdict::crash, signal_text(exit.signal) + tail};
  switch (exit.code) {
    case 0:
      return {LabVerdict::pass, ""};
    case kLabWorkerOutOfBounds:
      return {LabVerdict::out_of_bounds, said};
    case kLabWorkerCandidateFailed:
      return {LabVerdict::candidate_error, said};
    case kLabWorkerWroteInput:
      return {LabVerdict::crash, said};
    case kLabWorkerLoadFailed:
      return {LabVerdict::compile_error, said};
    default:
      return {LabVerdict::crash, str_cat("exited with code ", exit.code, tail)};
  }
}

std::vector<std::string> worker_argv(const std::string& dir, const char* mode) {
  return {lab_self_executable(), "lab", "--worker", dir, "--mode", mode};
}

// One checked run of the candidate in a fresh worker on the problem's current inputs.
LabFailure check_once(SuiteProblem& problem, const std::string& dir, const LabLimits& limits) {
  ReferenceOutputs references = compute_reference_outputs(problem);
  LabTask task = write_run_files(problem, dir);
  LabProcess worker(worker_argv(dir, "check"), limits, dir + "/worker.err");
  LabFailure failure = verdict_of_exit(worker.wait(limits.wall_seconds), limits);
  if (failure.verdict != LabVerdict::pass) return failure;
  return judge_outputs(problem, task, references, dir);
}

SuiteResult as_suite_result(const LabReport& report, const SuiteTiming& timing) {
  SuiteResult result;
  result.timed = timing.runs > 0;
  result.cost = report.cost;
  result.lathe = timing;
  return result;
}

// Interleaved timing of the candidate (in its worker), lathe and the vendor on one fresh input set.
void time_paths(SuiteProblem& problem, const LabOptions& options, LabReport& report) {
  problem.fill_inputs(fresh_seed());
  ReferenceOutputs references = compute_reference_outputs(problem);
  LabTask task = write_run_files(problem, report.work_dir);
  const LabLimits& limits = options.limits;
  LabProcess worker(worker_argv(report.work_dir, "time"), limits, report.work_dir + "/worker.err");
  auto end_with_exit = [&]() -> LabFailure {
    LabFailure failure = verdict_of_exit(worker.wait(limits.wall_seconds), limits);
    if (failure.verdict == LabVerdict::pass) failure = {LabVerdict::crash, "the worker stopped answering"};
    return failure;
  };
  TimedRun candidate = [&]() -> double {
    std::optional<std::string> line;
    if (worker.send_line("run")) line = worker.read_line(limits.wall_seconds);
    if (!line || line->rfind("time ", 0) != 0) throw end_with_exit();
    return std::stod(line->substr(5));
  };
  auto prepare = [&] { problem.prepare_run(); };
  std::vector<TimedRun> paths = {candidate};
  if (options.time_peers) paths.push_back(timed_run([&] { problem.run_lathe(); }, prepare));
  if (options.time_peers && problem.has_vendor()) paths.push_back(timed_run([&] { problem.run_vendor(); }, prepare));
  std::vector<SuiteTiming> timings = time_interleaved(paths, options.timing);
  std::optional<std::string> perf;
  if (worker.send_line("finish")) perf = worker.read_line(limits.wall_seconds);
  if (!perf) throw end_with_exit();
  LabFailure exit = verdict_of_exit(worker.wait(limits.wall_seconds), limits);
  if (exit.verdict != LabVerdict::pass) throw exit;
  LabFailure last = judge_outputs(problem, task, references, report.work_dir);
  if (last.verdict != LabVerdict::pass) throw LabFailure{last.verdict, "in the timed runs: " + last.detail};

  std::istringstream words(*perf);
  std::string word;
  words >> word >> word;
  if (word == "unavailable") {
    std::getline(words, report.perf_note);
    report.perf_note = report.perf_note.empty() ? "unknown" : report.perf_note.substr(1);
  } else {
    report.perf_available = true;
    report.cycles = std::stod(word);
    words >> report.instructions >> report.cache_misses >> report.perf_runs;
  }
  const char* names[] = {"candidate", "lathe", "vendor"};
  for (size_t i = 0; i < timings.size(); ++i) report.paths.push_back({names[i], timings[i]});
  if (timings.size() > 2) report.vendor_on = vendor_isa_summary();
}

void remove_work_dir(const std::string& dir) {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace

// Roofline figures of every timed path from the report's one set of peaks.
void apply_lab_peaks(LabReport& report, const MachinePeaks& peaks) {
  report.peaks = peaks;
  for (auto& path : report.paths) {
    SuiteResult result = as_suite_result(report, path.timing);
    apply_suite_peaks(result, report.peaks);
    path.gflops = result.gflops;
    path.gbytes = result.gbytes;
    path.roofline_percent = result.roofline_percent;
    report.floor_seconds = result.floor_seconds;
    report.bound = result.bound;
    report.memory_level = result.memory_level;
  }
}

// compile_candidate, or a copy of the object compiled before from the same source and command.
LabCompileResult compile_or_reuse(const std::string& source, const std::string& dir, const std::string& cache_dir,
                                  bool* cached) {
  *cached = false;
  if (cache_dir.empty()) return compile_candidate(source, dir);
  std::ifstream file(source, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::string object =
      str_cat(cache_dir, "/", std::hex, std::hash<std::string>{}(text + lab_compile_signature()), ".so");
  std::error_code ignored;
  if (std::filesystem::copy_file(object, dir + "/candidate.so", ignored)) {
    *cached = true;
    LabCompileResult result;
    result.ok = true;
    result.command = "(cached: " + object + ")";
    return result;
  }
  LabCompileResult result = compile_candidate(source, dir);
  if (result.ok) {
    std::filesystem::create_directories(cache_dir, ignored);
    std::filesystem::copy_file(dir + "/candidate.so", object, std::filesystem::copy_options::overwrite_existing,
                               ignored);
  }
  return result;
}

const char* lab_verdict_name(LabVerdict verdict) {
  switch (verdict) {
    case LabVerdict::pass:
      return "pass";
    case LabVerdict::compile_error:
      return "compile-error";
    case LabVerdict::crash:
      return "crash";
    case LabVerdict::timeout:
      return "timeout";
    case LabVerdict::out_of_bounds:
      return "out-of-bounds";
    case LabVerdict::nan:
      return "nan";
    case LabVerdict::wrong:
      return "wrong";
    case LabVerdict::too_fast:
      return "too-fast";
    case LabVerdict::candidate_error:
      return "candidate-error";
  }
  return "?";
}

int lab_exit_code(LabVerdict verdict) { return verdict == LabVerdict::pass ? 0 : 2 + static_cast<int>(verdict); }

std::string describe_lab_problem(const std::string& name, bool quick) {
  auto problem = make_problem(find_entry(name), quick);
  problem->fill_inputs(1);
  LabTask task = make_lab_task(problem->named_inputs(), problem->outputs(), problem->shape_text(), num_threads());
  std::string text = str_cat(name, ": ", problem->info().summary, "\nshape: ", problem->shape_text(), "\n");
  auto list = [&](const char* kind, const std::vector<LabTensorSlot>& slots) {
    for (size_t i = 0; i < slots.size(); ++i)
      text += str_cat("  ", kind, "[", i, "] ", slots[i].name, ": ", dtype_name(slots[i].dtype), " ",
                      slots[i].shape.to_string(), "\n");
  };
  list("inputs", task.inputs);
  list("outputs", task.outputs);
  text += "  dims:";
  for (const auto& [dim, value] : task.dims) text += str_cat(" ", dim, "=", value);
  return text + "\n";
}

LabReport run_kernel_lab(const LabOptions& options) {
  LATHE_CHECK(options.sets >= 1, "--sets must be at least 1, got ", options.sets);
  const SuiteEntry& entry = find_entry(options.problem);
  LATHE_CHECK(std::ifstream(options.candidate).good(), "cannot read the candidate ", options.candidate);
  LabReport report;
  report.problem = options.problem;
  report.candidate = options.candidate;
  report.seed = fresh_seed();
  auto problem = make_problem(entry, options.quick);
  report.shape = problem->shape_text();
  char pattern[] = "/tmp/lathe-lab-XXXXXX";
  LATHE_CHECK(mkdtemp(pattern) != nullptr, "cannot create a work directory in /tmp");
  report.work_dir = pattern;
  const bool measure_peaks = options.time && !options.peaks;
  MachinePeaks peaks_start = measure_peaks ? measure_machine_peaks(options.quick) : MachinePeaks{};

  report.compile = compile_or_reuse(std::filesystem::absolute(options.candidate).string(), report.work_dir,
                                    options.object_cache_dir, &report.compile_cached);
  try {
    if (!report.compile.ok) throw LabFailure{LabVerdict::compile_error, "the compiler rejected it (see the log)"};
    // The stated shape on `sets` fresh sets, then the hidden shapes (one set each).
    std::vector<std::unique_ptr<SuiteProblem>> hidden;
    for (int i = 0; i < options.hidden_shapes; ++i)
      hidden.push_back(entry.make_at_random_shape ? entry.make_at_random_shape(report.seed + 7919 * (i + 1))
                                                  : make_problem(entry, !options.quick));
    struct Run {
      SuiteProblem* problem;
      bool hidden;
      int set;
    };
    std::vector<Run> runs;
    for (int set = 0; set < options.sets; ++set) runs.push_back({problem.get(), false, set});
    for (auto& shape : hidden) runs.push_back({shape.get(), true, 0});
    uint64_t stream = 0;
    for (const Run& run : runs) {
      run.problem->fill_inputs(report.seed + 0x9e3779b97f4a7c15ull * ++stream);
      LabFailure result = check_once(*run.problem, report.work_dir, options.limits);
      report.checks.push_back({run.hidden ? "hidden " + run.problem->shape_text() : run.problem->shape_text(),
                               run.hidden, run.set, result.verdict, result.detail});
      if (result.verdict != LabVerdict::pass) throw result;
    }
    if (options.time) {
      time_paths(*problem, options, report);
      report.cost = problem->cost();
      report.peaks = measure_peaks ? higher_peaks(peaks_start, measure_machine_peaks(options.quick)) : *options.peaks;
      apply_lab_peaks(report, report.peaks);
      const SuiteTiming& candidate = report.paths.front().timing;
      if (candidate.median < report.floor_seconds)
        throw LabFailure{
            LabVerdict::too_fast,
            str_cat("median ", candidate.median * 1e3, " ms is below the roofline floor ", report.floor_seconds * 1e3,
                    " ms (", report.bound, report.bound == "memory" ? " from " + report.memory_level : std::string(),
                    "): too fast to be true")};
    }
  } catch (const LabFailure& failure) {
    report.verdict = failure.verdict;
    report.detail = failure.detail;
  }
  if (!options.keep) remove_work_dir(report.work_dir);
  return report;
}

std::string format_lab_report(const LabReport& report) {
  std::string text = str_cat("lathe lab: ", report.candidate, " for ", report.problem, " (", report.shape, "), seed ",
                             report.seed, "\n");
  if (!report.compile.ok)
    text += "compile: FAILED\n  " + report.compile.command + "\n" + report.compile.log + "\n";
  else if (!report.compile.log.empty())
    text += "compile warnings:\n" + report.compile.log + "\n";
  if (!report.checks.empty()) {
    char line[512];
    std::snprintf(line, sizeof line, "%-40s %4s  %-15s %s\n", "check (shape)", "set", "verdict", "detail");
    text += line;
    for (const auto& check : report.checks) {
      std::snprintf(line, sizeof line, "%-40s %4d  %-15s %s\n", check.shape.c_str(), check.set,
                    lab_verdict_name(check.verdict), check.detail.c_str());
      text += line;
    }
  }
  if (!report.paths.empty()) {
    char line[512];
    std::snprintf(line, sizeof line, "\n%-10s %12s %7s %10s %8s %7s %8s\n", "path", "median ms", "noise", "x cand",
                  "GFLOP/s", "GB/s", "%roof");
    text += line;
    double candidate = report.paths.front().timing.median;
    for (const auto& path : report.paths) {
      std::snprintf(line, sizeof line, "%-10s %12.4f %6.1f%% %9.2fx %8.1f %7.1f %7.1f%%\n", path.path.c_str(),
                    path.timing.median * 1e3, 100 * path.timing.noise, path.timing.median / candidate, path.gflops,
                    path.gbytes, path.roofline_percent);
      text += line;
    }
    text += str_cat("roofline floor ", report.floor_seconds * 1e3, " ms (", report.bound,
                    report.bound == "memory" ? " bound, " + report.memory_level + " bandwidth" : " bound",
                    "); peaks (higher of start and end): f32 ", report.peaks.f32_gflops, " GFLOP/s, DRAM ",
                    report.peaks.memory_gbytes(0, true), " GB/s; x cand = path time / candidate time\n");
    if (!report.vendor_on.empty()) text += "vendor on: " + report.vendor_on + "\n";
    if (report.perf_available)
      text +=
          str_cat("hardware counters per timed run: ", report.cycles / std::max(1, report.perf_runs), " cycles, ",
                  report.instructions / std::max(1, report.perf_runs), " instructions, ",
                  report.cache_misses / std::max(1, report.perf_runs), " cache misses (", report.perf_runs, " runs)\n");
    else
      text += "hardware counters: not available (" + report.perf_note + ")\n";
  }
  text +=
      str_cat("verdict: ", lab_verdict_name(report.verdict), report.detail.empty() ? "" : ": " + report.detail, "\n");
  if (!report.work_dir.empty() && std::filesystem::exists(report.work_dir))
    text += "work directory kept: " + report.work_dir + "\n";
  return text;
}

Json lab_report_json(const LabReport& report) {
  Json json = Json::object();
  json.set("problem", report.problem);
  json.set("shape", report.shape);
  json.set("candidate", report.candidate);
  json.set("seed", std::to_string(report.seed));
  json.set("verdict", lab_verdict_name(report.verdict));
  json.set("detail", report.detail);
  json.set("exit_code", lab_exit_code(report.verdict));
  Json compile = Json::object();
  compile.set("ok", report.compile.ok);
  compile.set("command", report.compile.command);
  compile.set("log", report.compile.log);
  json.set("compile", compile);
  Json checks = Json::array();
  for (const auto& check : report.checks) {
    Json row = Json::object();
    row.set("shape", check.shape);
    row.set("hidden", check.hidden);
    row.set("set", check.set);
    row.set("verdict", lab_verdict_name(check.verdict));
    row.set("detail", check.detail);
    checks.push(row);
  }
  json.set("checks", checks);
  Json paths = Json::array();
  for (const auto& path : report.paths) {
    Json row = suite_timing_to_json(path.timing);
    row.set("path", path.path);
    row.set("gflops_per_second", path.gflops);
    row.set("gbytes_per_second", path.gbytes);
    row.set("roofline_percent", path.roofline_percent);
    paths.push(row);
  }
  json.set("paths", paths);
  json.set("vendor_on", report.vendor_on);
  json.set("flops", report.cost.flops);
  json.set("bytes", report.cost.bytes);
  json.set("floor_seconds", report.floor_seconds);
  json.set("bound", report.bound);
  json.set("memory_level", report.memory_level);
  if (!report.paths.empty()) json.set("peaks", report.peaks.to_json());
  Json perf = Json::object();
  perf.set("available", report.perf_available);
  if (report.perf_available) {
    perf.set("cycles", report.cycles);
    perf.set("instructions", report.instructions);
    perf.set("cache_misses", report.cache_misses);
    perf.set("runs", report.perf_runs);
  } else {
    perf.set("reason", report.perf_note);
  }
  json.set("hardware_counters", perf);
  return json;
}

}  // namespace lathe
