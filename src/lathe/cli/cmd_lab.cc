// `lathe lab --problem NAME CANDIDATE.cc`: judge a candidate kernel for a suite problem (see
// src/lathe/bench/lab/lab.h and docs/kernel_lab.md). Exit codes: 0 pass; 2 bad input; 3 compile
// error, 4 crash, 5 timeout, 6 out of bounds, 7 NaN, 8 wrong, 9 too fast to be true, 10 the
// candidate returned non-zero. `lathe lab --worker DIR --mode check|time` is the worker process
// the command starts for itself (not for people).
#include <cstdio>
#include <cstdlib>

#include "lathe/bench/lab/lab.h"
#include "lathe/bench/lab/lab_task.h"
#include "lathe/cli/command_line.h"
#include "lathe/cli/commands.h"

namespace lathe::cli {

int run_lab(int argc, char** argv) {
  CommandLine command_line(
      "lathe lab --problem NAME [options] CANDIDATE.cc",
      "Compiles a candidate kernel written against the C ABI of lathe_lab.h (docs/kernel_lab.md) with the\n"
      "machine's C++ compiler at lathe's flags, runs it in a separate process under time and memory limits\n"
      "(read-only inputs, NaN-poisoned and guard-paged outputs), checks it on fresh input sets and hidden\n"
      "shapes against the suite's float64 reference, and times it interleaved with lathe's path and the\n"
      "vendor baseline. Exit 0 pass, 3 compile error, 4 crash, 5 timeout, 6 out of bounds, 7 NaN, 8 wrong,\n"
      "9 too fast to be true, 10 the candidate returned non-zero; 2 bad input.");
  add_runtime_options(command_line);
  command_line.option("problem", "NAME", "the suite problem (`lathe bench --suite --list`)");
  command_line.positionals("CANDIDATE", "the candidate's source file (C or C++)");
  command_line.flag("describe", "print the problem's inputs, outputs and dims as the candidate sees them, and exit");
  command_line.flag("quick", "the problem's small --quick shape as the stated shape");
  command_line.option("sets", "N", "fresh input sets at the stated shape", "5");
  command_line.option("hidden-shapes", "N", "further shapes checked (one set each)", "2");
  command_line.flag("no-time", "correctness only");
  command_line.option("timeout", "SECONDS", "wall-clock limit per worker process", "60");
  command_line.option("cpu-seconds", "N", "CPU-time limit per worker process", "240");
  command_line.option("memory-mb", "MB", "address-space limit per worker process", "16384");
  command_line.flag("keep", "keep the work directory (candidate.so, task.json, data.bin, logs)");
  command_line.flag("json", "print the report as one JSON object");
  command_line.option("worker", "DIR", "internal: run as the worker process of a lab run in DIR");
  command_line.option("mode", "MODE", "internal: the worker's mode (check or time)", "check");
  if (!command_line.parse(argc, argv)) return 0;
  if (command_line.has("worker")) return run_lab_worker(command_line.get("worker"), command_line.get("mode"));
  apply_runtime_options(command_line);
  LATHE_CHECK(command_line.has("problem"), "--problem NAME is required (`lathe bench --suite --list`)");
  LabOptions options;
  options.problem = command_line.get("problem");
  options.quick = command_line.has("quick");
  if (command_line.has("describe")) {
    std::printf("%s", describe_lab_problem(options.problem, options.quick).c_str());
    return 0;
  }
  const auto& positionals = command_line.positional_values();
  LATHE_CHECK(positionals.size() == 1, "give exactly one candidate source file, got ", positionals.size());
  options.candidate = positionals.front();
  options.sets = command_line.get_int("sets");
  options.hidden_shapes = command_line.get_int("hidden-shapes");
  LATHE_CHECK(options.hidden_shapes >= 0, "--hidden-shapes must be at least 0");
  options.time = !command_line.has("no-time");
  options.keep = command_line.has("keep");
  options.limits.wall_seconds = command_line.get_double("timeout");
  options.limits.cpu_seconds = command_line.get_int("cpu-seconds");
  options.limits.address_space_bytes = static_cast<long long>(command_line.get_int("memory-mb")) << 20;
  LATHE_CHECK(
      options.limits.wall_seconds > 0 && options.limits.cpu_seconds > 0 && options.limits.address_space_bytes > 0,
      "--timeout, --cpu-seconds and --memory-mb must be positive");
  if (options.quick) options.timing.warmup_runs = 1, options.timing.blocks = 2, options.timing.runs_per_block = 5;
  LabReport report = run_kernel_lab(options);
  if (command_line.has("json"))
    std::printf("%s\n", lab_report_json(report).dump(2).c_str());
  else
    std::printf("%s", format_lab_report(report).c_str());
  return lab_exit_code(report.verdict);
}

}  // namespace lathe::cli
