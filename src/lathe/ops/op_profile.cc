#include "lathe/ops/op_profile.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>

namespace lathe {
namespace {

std::atomic<bool> g_enabled{false}, g_by_shape{false};
std::mutex g_mutex;
std::map<std::string, OpTime>& table() {
  static std::map<std::string, OpTime> times;
  return times;
}

}  // namespace

int& OpProfileScope::depth() {
  static thread_local int value = 0;
  return value;
}

bool op_profiling_enabled() { return g_enabled.load(std::memory_order_relaxed); }
void set_op_profiling(bool enabled) { g_enabled.store(enabled, std::memory_order_relaxed); }

bool op_profiling_by_shape() { return g_by_shape.load(std::memory_order_relaxed); }
void set_op_profiling_by_shape(bool by_shape) { g_by_shape.store(by_shape, std::memory_order_relaxed); }

void record_op_time(const char* op, const std::string& shape, double seconds) {
  std::lock_guard<std::mutex> lock(g_mutex);
  OpTime& entry = table()[shape.empty() ? std::string(op) : std::string(op) + '\n' + shape];
  entry.op = op;
  entry.shape = shape;
  entry.calls += 1;
  entry.seconds += seconds;
}

std::vector<OpTime> op_profile() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<OpTime> result;
  for (const auto& [name, entry] : table()) result.push_back(entry);
  std::sort(result.begin(), result.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return result;
}

void reset_op_profile() {
  std::lock_guard<std::mutex> lock(g_mutex);
  table().clear();
}

std::string format_op_profile(const std::vector<OpTime>& profile, double total_seconds) {
  double op_total = 0;
  for (const OpTime& entry : profile) op_total += entry.seconds;
  const double denominator = total_seconds > 0 ? total_seconds : op_total;
  std::string text;
  char line[160];
  const bool shapes =
      std::any_of(profile.begin(), profile.end(), [](const OpTime& entry) { return !entry.shape.empty(); });
  std::snprintf(line, sizeof line, "%-28s %8s %10s %7s", "op", "calls", "seconds", "share");
  text += line;
  text += shapes ? "  shape\n" : "\n";
  for (const OpTime& entry : profile) {
    std::snprintf(line, sizeof line, "%-28s %8lld %10.3f %6.1f%%", entry.op.c_str(),
                  static_cast<long long>(entry.calls), entry.seconds,
                  denominator > 0 ? 100.0 * entry.seconds / denominator : 0.0);
    text += line;
    text += entry.shape.empty() ? "\n" : "  " + entry.shape + "\n";
  }
  if (total_seconds > 0) {
    std::snprintf(line, sizeof line, "%-28s %8s %10.3f %6.1f%%\n", "(outside ops)", "", total_seconds - op_total,
                  100.0 * (total_seconds - op_total) / total_seconds);
    text += line;
  }
  return text;
}

}  // namespace lathe
