#include "lathe/telemetry/progress.h"

#include <time.h>
#include <unistd.h>

#include "lathe/core/clock.h"
#include "lathe/core/error.h"

namespace lathe {
namespace {

std::string printf_string(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  auto total = static_cast<int64_t>(std::llround(seconds));
  int64_t days = total / 86400, hours = total / 3600 % 24, minutes = total / 60 % 60, secs = total % 60;
  char buffer[48];
  if (days > 0)
    std::snprintf(buffer, sizeof buffer, "%lldd%02lldh", static_cast<long long>(days), static_cast<long long>(hours));
  else if (hours > 0)
    std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", static_cast<long long>(hours),
                  static_cast<long long>(minutes));
  else if (minutes > 0)
    std::snprintf(buffer, sizeof buffer, "%lldm%02llds", static_cast<long long>(minutes), static_cast<long long>(secs));
  else
    std::snprintf(buffer, sizeof buffer, "%llds", static_cast<long long>(secs));
  return buffer;
}

std::string format_count(double value) {
  if (!std::isfinite(value)) return "--";
  if (value < 0) {
    std::string text = "-";  // not `"-" + ...`: GCC 12 warns falsely (-Wrestrict) on that form
    return text += format_count(-value);
  }
  static const char* const kSuffixes[] = {"", "k", "M", "G", "T", "P"};
  double scaled = value;
  for (int level = 0; level < 6; ++level, scaled /= 1000) {
    // Choose the first unit whose rounded text stays below 1000 ("999.6" is "1.0k", not "1000").
    if (level == 0) {
      if (scaled < 999.5) return printf_string("%.0f", scaled);
    } else if (scaled < 99.95) {
      return printf_string("%.1f", scaled) + kSuffixes[level];
    } else if (scaled < 999.5 || level == 5) {
      return printf_string("%.0f", scaled) + kSuffixes[level];
    }
  }
  return "--";  // unreachable: level 5 always returns
}

std::string format_progress(const ProgressReport& report) {
  std::string line = "step ";
  if (report.total_steps > 0) {
    std::string total = std::to_string(report.total_steps), step = std::to_string(report.step);
    // Pad to the total's width so a rewritten line does not jitter as the step grows.
    if (step.size() < total.size()) line.append(total.size() - step.size(), ' ');
    line += step + "/" + total;
  } else {
    line += std::to_string(report.step);
  }
  if (!std::isnan(report.loss)) line += " | loss " + printf_string("%.3f", report.loss);
  if (!std::isnan(report.lr)) line += " | lr " + printf_string("%.1e", report.lr);
  if (!std::isnan(report.tokens_per_second)) line += " | " + format_count(report.tokens_per_second) + " tok/s";
  if (!std::isnan(report.mfu)) line += " | MFU " + printf_string("%.1f", 100 * report.mfu) + "%";
  if (!std::isnan(report.elapsed_seconds)) line += " | " + format_duration(report.elapsed_seconds) + " elapsed";
  if (report.total_steps > 0) line += " | ETA " + format_duration(report.eta_seconds);
  return line;
}

void StepTimeEstimator::record(int64_t steps, double seconds) {
  if (steps <= 0 || !std::isfinite(seconds) || seconds < 0) return;
  double per_step = seconds / static_cast<double>(steps);
  average_ = (1 - smoothing_) * average_ + smoothing_ * per_step;
  weight_ = (1 - smoothing_) * weight_ + smoothing_;
}

double StepTimeEstimator::seconds_per_step() const { return weight_ > 0 ? average_ / weight_ : NAN; }

bool progress_rewrites_line(bool stream_is_terminal, Launcher launcher) {
  return stream_is_terminal && launcher == Launcher::none;
}

std::string local_timestamp() {
  const time_t now = time(nullptr);
  struct tm local {};
  localtime_r(&now, &local);
  char buffer[32];
  strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S", &local);
  return buffer;
}

ProgressPrinter::ProgressPrinter(ProgressOptions options) : options_(std::move(options)) {
  LATHE_ASSERT(options_.stream != nullptr);
  if (!options_.clock) options_.clock = now_seconds;
  rewrite_line_ = options_.rewrite_line.value_or(
      progress_rewrites_line(isatty(fileno(options_.stream)) == 1, launch_environment().launcher));
  timestamp_lines_ = options_.timestamp_lines.value_or(!rewrite_line_);
  if (!options_.timestamp) options_.timestamp = local_timestamp;
  start_time_ = last_time_ = options_.clock();
  last_step_ = options_.start_step;
}

std::string ProgressPrinter::prefix() const { return timestamp_lines_ ? options_.timestamp() + " " : ""; }

void ProgressPrinter::write(const std::string& text) {
  std::fputs(text.c_str(), options_.stream);
  std::fflush(options_.stream);
}

void ProgressPrinter::update(int64_t step, double loss, double lr, double tokens_per_second, double mfu) {
  double now = options_.clock();
  step_time_.record(step - last_step_, now - last_time_);
  last_step_ = step;
  last_time_ = now;
  ProgressReport report;
  report.step = step;
  report.total_steps = options_.total_steps;
  report.loss = loss;
  report.lr = lr;
  report.tokens_per_second = tokens_per_second;
  report.mfu = mfu;
  report.elapsed_seconds = now - start_time_;
  if (options_.total_steps > 0)
    report.eta_seconds = step_time_.eta_seconds(std::max<int64_t>(0, options_.total_steps - step));
  std::string line = format_progress(report);
  if (options_.on_line) options_.on_line(line);
  if (!rewrite_line_) return write(prefix() + line + "\n");
  // Blank out what is left of a longer previous line.
  std::string padding(current_line_.size() > line.size() ? current_line_.size() - line.size() : 0, ' ');
  write("\r" + line + padding);
  current_line_ = line;
}

void ProgressPrinter::print_line(const std::string& message) {
  if (options_.on_line) options_.on_line(message);
  if (!rewrite_line_ || current_line_.empty()) return write(prefix() + message + "\n");
  std::string padding(current_line_.size() > message.size() ? current_line_.size() - message.size() : 0, ' ');
  write("\r" + message + padding + "\n" + current_line_);  // the message above, the progress line redrawn
}

void ProgressPrinter::finish() {
  if (rewrite_line_ && !current_line_.empty()) write("\n");
  current_line_.clear();
}

}  // namespace lathe
