// The training progress line and its printer:
//   step 120/600 | loss 3.412 | lr 2.9e-03 | 5.1k tok/s | MFU 41.2% | 3m12s elapsed | ETA 7m05s
// On a terminal of a single process the printer rewrites one line in place ('\r'). Into a file or
// pipe (CI logs, nohup), and under any launcher (mpirun and lathe launch give every rank a
// pseudo-terminal whose output ends up in one log), it prints one complete line per update,
// prefixed with the local date and time ("2026-12-01 08:00:00 step 120/600 | ..."), since
// carriage returns make logs unreadable.
// The ETA comes from an exponential moving average of seconds per step, so one slow step
// (a checkpoint, an evaluation) moves it a little, not a lot.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "lathe/core/launcher.h"

namespace lathe {

// "45s", "3m12s", "1h02m", "2d03h" (rounded to whole seconds); "--" when negative or not finite.
std::string format_duration(double seconds);
// Three significant figures with k/M/G/T suffixes: 950 -> "950", 5100 -> "5.1k",
// 123456 -> "123k", 1.5e6 -> "1.5M". "--" when not finite.
std::string format_count(double value);

// One progress update. NaN fields are unknown and left out of the line (ETA shows "--").
struct ProgressReport {
  int64_t step = 0;
  int64_t total_steps = 0;  // 0: unknown, shown as "step 120"
  double loss = NAN;
  double lr = NAN;
  double tokens_per_second = NAN;
  double mfu = NAN;  // model FLOP utilisation as a fraction: 0.412 -> "MFU 41.2%"
  double elapsed_seconds = NAN;
  double eta_seconds = NAN;
};

std::string format_progress(const ProgressReport& report);

// Seconds per step as an exponential moving average, bias-corrected (as Adam's moments) so the
// first measurements are not pulled toward zero.
class StepTimeEstimator {
 public:
  explicit StepTimeEstimator(double smoothing = 0.1) : smoothing_(smoothing) {}
  void record(int64_t steps, double seconds);  // `steps` steps took `seconds` in all
  double seconds_per_step() const;             // NaN before the first record
  double eta_seconds(int64_t steps_remaining) const {
    return seconds_per_step() * static_cast<double>(steps_remaining);
  }

 private:
  double smoothing_;
  double average_ = 0;
  double weight_ = 0;  // 1 - (1 - smoothing)^records: the bias correction
};

// Whether progress rewrites its line: only on a terminal, and only when no launcher started this
// process (Launcher::none).
bool progress_rewrites_line(bool stream_is_terminal, Launcher launcher);
// The local date and time as "2026-12-01 08:00:00", the prefix of line-mode progress.
std::string local_timestamp();

struct ProgressOptions {
  int64_t total_steps = 0;
  int64_t start_step = 0;  // resumed runs: the step the run continues from
  std::FILE* stream = stderr;
  std::optional<bool> rewrite_line;        // default: progress_rewrites_line(isatty(stream), launch_environment())
  std::optional<bool> timestamp_lines;     // default: !rewrite_line; prefixes each line with timestamp()
  std::function<std::string()> timestamp;  // default: local_timestamp (tests inject one)
  std::function<void(const std::string&)> on_line;  // each complete line, unprefixed (a log file's copy)
  std::function<double()> clock;                    // seconds; default: a steady clock (tests inject one)
};

class ProgressPrinter {
 public:
  explicit ProgressPrinter(ProgressOptions options);
  ~ProgressPrinter() { finish(); }
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

  // Reports the state after `step` optimizer steps; times and ETA come from the clock.
  void update(int64_t step, double loss, double lr = NAN, double tokens_per_second = NAN, double mfu = NAN);
  // Prints a message of its own line (e.g. a validation loss) without mangling the progress line.
  void print_line(const std::string& message);
  // Ends a rewritten line with a newline; called by the destructor too.
  void finish();

 private:
  void write(const std::string& text);
  std::string prefix() const;  // "2026-12-01 08:00:00 " in timestamped line mode, else ""

  ProgressOptions options_;
  bool rewrite_line_;
  bool timestamp_lines_;
  double start_time_;
  double last_time_;
  int64_t last_step_;
  StepTimeEstimator step_time_;
  std::string current_line_;  // the line shown in rewrite mode, "" when none
};

}  // namespace lathe
