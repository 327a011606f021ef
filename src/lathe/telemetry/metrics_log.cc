#include "lathe/telemetry/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "lathe/core/error.h"

namespace lathe {
namespace {

std::string read_whole_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  LATHE_CHECK(file.good(), "cannot open metrics log ", path);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

// A crash can leave a partial last line; cut the file back to its last complete line so that
// appended rows start on a line of their own.
void remove_torn_last_line(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error) || std::filesystem::file_size(path, error) == 0) return;
  std::string contents = read_whole_file(path);
  if (contents.back() == '\n') return;
  size_t keep = contents.rfind('\n');
  keep = keep == std::string::npos ? 0 : keep + 1;
  std::filesystem::resize_file(path, keep, error);
  LATHE_CHECK(!error, "cannot repair metrics log ", path, ": ", error.message());
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  std::filesystem::path target(path);
  std::error_code error;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), error);
  LATHE_CHECK(!error, "cannot create the directory of metrics log ", path, ": ", error.message());
  remove_torn_last_line(path);
  file_ = std::fopen(path.c_str(), "a");
  LATHE_CHECK(file_ != nullptr, "cannot open metrics log ", path, " for appending: ", std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::append(const Json& row) {
  LATHE_ASSERT(row.is_object());
  std::string line = row.dump(0);
  line += '\n';
  bool written = std::fwrite(line.data(), 1, line.size(), file_) == line.size();
  LATHE_CHECK(written && std::fflush(file_) == 0, "cannot write metrics log ", path_, ": ", std::strerror(errno));
}

std::vector<Json> read_metrics_log(const std::string& path) {
  std::string contents = read_whole_file(path);
  std::vector<Json> rows;
  size_t line_start = 0;
  for (int line_number = 1; line_start < contents.size(); ++line_number) {
    size_t line_end = contents.find('\n', line_start);
    bool complete = line_end != std::string::npos;
    std::string line = contents.substr(line_start, complete ? line_end - line_start : std::string::npos);
    line_start = complete ? line_end + 1 : contents.size();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      rows.push_back(Json::parse(line));
    } catch (const Error& error) {
      if (!complete) break;  // torn by a crash mid-write
      throw error.with_context(str_cat(path, ":", line_number));
    }
    LATHE_CHECK(rows.back().is_object(), path, ":", line_number, ": expected a JSON object per line");
  }
  return rows;
}

void check_metrics_log_before_appending(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return;
  const std::string contents = read_whole_file(path);
  const size_t complete = contents.rfind('\n') == std::string::npos ? 0 : contents.rfind('\n') + 1;
  if (complete < contents.size()) {
    std::filesystem::resize_file(path, complete, error);
    LATHE_CHECK(!error, "cannot cut the torn last line of ", path, ": ", error.message());
  }
  size_t line_start = 0;
  for (int line_number = 1; line_start < complete; ++line_number) {
    const size_t line_end = contents.find('\n', line_start);
    const std::string line = contents.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = str_cat(path, ":", line_number);
    const std::string fix = " (fix or delete that line, or use another run_dir)";
    Json row;
    try {
      row = Json::parse(line);
    } catch (const Error& parse_error) {
      throw Error(str_cat(where, ": ", parse_error.what(), fix));
    }
    LATHE_CHECK(row.is_object(), where, ": expected a JSON object per line", fix);
    const Json& step = row.get("step");
    LATHE_CHECK(step.is_number() && step.as_number() == std::floor(step.as_number()), where,
                ": expected an integer \"step\"", fix);
    for (const char* key : {"loss", "val_loss"})
      LATHE_CHECK(!row.find(key) || row.get(key).is_number(), where, ": \"", key, "\" must be a number", fix);
  }
}

}  // namespace lathe
