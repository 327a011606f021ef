#include "lathe/telemetry/run_log.h"

#include <cerrno>
#include <cstring>

#include "lathe/core/error.h"
#include "lathe/telemetry/progress.h"

namespace lathe {

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return "DEBUG";
    case LogLevel::info:
      return "INFO";
    case LogLevel::warning:
      return "WARN";
  }
  return "INFO";
}

RunLog::RunLog(std::FILE* console, LogLevel console_level) : console_(console), console_level_(console_level) {
  cookie_io_functions_t functions{};
  functions.write = [](void* cookie, const char* data, size_t size) -> ssize_t {
    return RunLog::write_cookie(cookie, data, size);
  };
  stream_ = fopencookie(this, "w", functions);
  LATHE_CHECK(stream_ != nullptr, "cannot open the log stream");
  std::setvbuf(stream_, nullptr, _IOLBF, 0);
}

RunLog::~RunLog() {
  std::fclose(stream_);  // flushes what is buffered through write_cookie
  if (!pending_.empty()) log(LogLevel::info, pending_);
  if (file_) std::fclose(file_);
}

long RunLog::write_cookie(void* cookie, const char* data, size_t size) {
  auto* self = static_cast<RunLog*>(cookie);
  self->pending_.append(data, size);
  for (size_t end; (end = self->pending_.find('\n')) != std::string::npos;) {
    std::string line = self->pending_.substr(0, end);
    self->pending_.erase(0, end + 1);
    self->log(LogLevel::info, line);
  }
  return static_cast<long>(size);
}

void RunLog::log(LogLevel level, const std::string& message) {
  if (shows(level)) {
    const std::string line =
        level == LogLevel::info ? message + "\n" : str_cat(log_level_name(level), " ", message, "\n");
    std::fputs(line.c_str(), console_);
    std::fflush(console_);
  }
  to_file(level, message);
}

void RunLog::to_file(LogLevel level, const std::string& message) {
  const std::string line = str_cat(local_timestamp(), " ", log_level_name(level), " ", message, "\n");
  if (!file_) {
    held_ += line;
    return;
  }
  std::fputs(line.c_str(), file_);
  std::fflush(file_);
}

void RunLog::open_file(const std::string& path) {
  if (file_) return;
  file_ = std::fopen(path.c_str(), "a");
  LATHE_CHECK(file_ != nullptr, "cannot open '", path, "' for appending: ", std::strerror(errno));
  std::fputs(held_.c_str(), file_);
  std::fflush(file_);
  held_.clear();
}

}  // namespace lathe
