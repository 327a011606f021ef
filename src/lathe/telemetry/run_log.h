// The trainer's log. Every complete line written to its stream goes to the console as written
// (the messages people and tests read: "resuming from ...", "stopped at step 6: ...") and to
// RUN_DIR/train.log as a timestamped, levelled line:
//   2026-12-01 08:00:00 INFO resuming from runs/x/checkpoints/step_00000100 (step 100)
// Console levels: --verbose (LogLevel::debug) shows DEBUG lines ("DEBUG ..."), --quiet
// (LogLevel::warning) drops info lines; the file holds every level. Lines logged before
// open_file() wait in memory, so a run refused before training leaves the run directory untouched.
#pragma once

#include <cstdio>
#include <string>

namespace lathe {

enum class LogLevel { debug, info, warning };

// "DEBUG", "INFO", "WARN".
const char* log_level_name(LogLevel level);

class RunLog {
 public:
  // `console` may be null (no console output).
  RunLog(std::FILE* console, LogLevel console_level);
  ~RunLog();
  RunLog(const RunLog&) = delete;
  RunLog& operator=(const RunLog&) = delete;

  // A stream for fprintf: each complete line is logged at info level (a partial last line on close).
  std::FILE* stream() const { return stream_; }
  void log(LogLevel level, const std::string& message);
  void debug(const std::string& message) { log(LogLevel::debug, message); }
  // Writes `message` to the file only (lines the console shows another way, e.g. progress).
  void to_file(LogLevel level, const std::string& message);
  // Appends to `path` from now on, after the lines held so far. Throws lathe::Error when it cannot.
  void open_file(const std::string& path);
  // Whether `level` lines reach the console.
  bool shows(LogLevel level) const { return console_ != nullptr && level >= console_level_; }

 private:
  static long write_cookie(void* cookie, const char* data, size_t size);

  std::FILE* console_;
  LogLevel console_level_;
  std::FILE* file_ = nullptr;
  std::FILE* stream_ = nullptr;
  std::string pending_;
  std::string held_;  // file lines before open_file()  // written to stream() and not yet ended by a newline
};

}  // namespace lathe
