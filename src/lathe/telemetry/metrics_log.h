// Training metrics as JSON Lines: one JSON object per line ({"step": 120, "loss": 3.41, ...}),
// written and flushed line by line, so a crashed run keeps everything it logged and `tail -f`,
// pandas (`read_json(lines=True)`) and jq read it live. Non-finite numbers are written as null.
//
// Opening an existing file appends (a resumed run continues the same log). A last line cut short
// by a crash mid-write is removed on open, so the file stays valid JSONL.
// Errors (cannot create, cannot write) throw lathe::Error naming the file.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "lathe/core/json.h"

namespace lathe {

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);  // creates parent directories
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void append(const Json& row);  // row must be an object; one line, flushed
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// All rows of a metrics log, in order. A torn last line (no newline, not valid JSON) is ignored;
// any other malformed line throws lathe::Error naming the file and line number.
std::vector<Json> read_metrics_log(const std::string& path);

// Before a run appends to an existing metrics log: every complete line must be a JSON object with
// an integer "step" and numeric "loss"/"val_loss" when present (what the loss curve reads at the
// end), else lathe::Error names the file and line now rather than after training. A torn last
// line (a process killed mid-write) is cut off, so the next row starts on a line of its own.
// A missing file is fine.
void check_metrics_log_before_appending(const std::string& path);

}  // namespace lathe
