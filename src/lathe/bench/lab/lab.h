// `lathe lab`: judges a candidate kernel that anyone writes (a person, an external agent, later the
// optimizer) for a suite problem, against the C ABI of lathe_lab.h, and reports it honestly:
//   - compiled with the machine's C++ compiler at lathe's flags (lab_sandbox.h);
//   - run in a separate worker process under CPU-time, memory and wall-clock limits, with
//     read-only inputs and NaN-poisoned, guard-paged outputs, so a crash, hang, out-of-bounds
//     access, NaN or wrong value is a verdict, never a crash of lathe;
//   - checked on `sets` fresh input sets drawn from a seed the candidate cannot know (fresh each
//     invocation, from std::random_device) plus hidden extra shapes, each in a fresh process, against
//     the suite's float64 reference with its tolerance rule, compared here in the parent;
//   - timed with the suite's interleaved blocks (suite_judge.h: time_interleaved) beside lathe's
//     path and the vendor baseline; the candidate's times come from its own process;
//   - the last timed outputs are checked as well (no results reused across calls), and a median
//     below the roofline floor (cache-aware, peaks measured at the start and end) is rejected as
//     too fast to be true; hardware counters via perf_event_open or a "not available" reason.
// The problem registry, inputs, references and tolerance are the suite's (bench/suite/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/bench/lab/lab_sandbox.h"
#include "lathe/bench/machine_peaks.h"
#include "lathe/bench/suite/suite_judge.h"
#include "lathe/core/json.h"

namespace lathe {

enum class LabVerdict { pass, compile_error, crash, timeout, out_of_bounds, nan, wrong, too_fast, candidate_error };
const char* lab_verdict_name(LabVerdict verdict);  // "pass", "compile-error", "out-of-bounds", ...
// 0 for pass; 3-10, one per verdict (docs/kernel_lab.md); 2 is bad input (thrown as lathe::Error).
int lab_exit_code(LabVerdict verdict);

struct LabOptions {
  std::string problem;    // a suite problem name
  std::string candidate;  // the candidate's source file
  bool quick = false;     // the problem's --quick size as the stated shape
  int sets = 5;           // fresh input sets at the stated shape
  int hidden_shapes = 2;  // further shapes, one set each
  bool time = true;
  bool keep = false;  // keep the work directory (printed)
  LabLimits limits;
  SuiteOptions timing;  // warm-up runs and interleaved blocks
  // For a caller that judges many candidates (`lathe optimize`): time the candidate alone (no
  // lathe / vendor rows), use these peaks instead of measuring them at the start and end, and
  // keep compiled candidates in this directory by a hash of their source (and the compile
  // command), so an unchanged candidate is not compiled twice. Inputs stay fresh per call.
  bool time_peers = true;
  std::optional<MachinePeaks> peaks;
  std::string object_cache_dir;
};

struct LabCheckRow {
  std::string shape;
  bool hidden = false;
  int set = 0;
  LabVerdict verdict = LabVerdict::pass;
  std::string detail;
};

struct LabPathRow {
  std::string path;  // "candidate", "lathe", "vendor"
  SuiteTiming timing;
  double gflops = 0, gbytes = 0, roofline_percent = 0;
};

struct LabReport {
  std::string problem, shape, candidate, work_dir;
  uint64_t seed = 0;  // drawn afresh; printed so a failure can be studied
  LabVerdict verdict = LabVerdict::pass;
  std::string detail;
  LabCompileResult compile;
  bool compile_cached = false;  // the object came from LabOptions::object_cache_dir
  std::vector<LabCheckRow> checks;
  std::vector<LabPathRow> paths;
  std::string vendor_on;  // what the vendor row ran on, e.g. "oneDNN avx2" (vendor_isa_summary)
  OpCost cost;
  double floor_seconds = 0;
  std::string bound, memory_level;
  MachinePeaks peaks;
  bool perf_available = false;
  std::string perf_note;  // why not, when not available
  double cycles = 0, instructions = 0, cache_misses = 0;
  int perf_runs = 0;
};

// Throws lathe::Error for bad input (unknown problem: the message lists the names; unreadable file).
LabReport run_kernel_lab(const LabOptions& options);
std::string format_lab_report(const LabReport& report);
// Sets the report's peaks and recomputes its roofline figures from them (a caller that judges
// several candidates gives every report the same final set).
void apply_lab_peaks(LabReport& report, const MachinePeaks& peaks);
Json lab_report_json(const LabReport& report);
// The ABI tensors of a problem at its stated shape: what `lathe lab --describe` prints.
std::string describe_lab_problem(const std::string& problem, bool quick);

}  // namespace lathe
