// Per-op wall-time accounting: where a training step's time goes, by library op, or by op and
// shape (each matmul shape its own row). Off by default (one relaxed atomic load per op call);
// `lathe train --profile` (by op), `--profile-shapes` (by op and shape) and `lathe bench train`
// turn it on. Times are wall-clock per call on the calling thread (ops parallelise inside), so
// they sum to the time spent in ops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

struct OpTime {
  std::string op;     // "matmul", "flash_attention_backward", ...
  std::string shape;  // the op's shape key when recorded by shape ("m=4096,n=256,k=1024,..."), else empty
  int64_t calls = 0;
  double seconds = 0;
};

// Marks the outermost op call on this thread; nested op calls are not recorded separately.
class OpProfileScope {
 public:
  OpProfileScope() { ++depth(); }
  ~OpProfileScope() { --depth(); }
  static bool nested() { return depth() > 0; }

 private:
  static int& depth();
};

bool op_profiling_enabled();
void set_op_profiling(bool enabled);
// Whether calls are recorded per op and shape (kept while profiling is switched off and on).
bool op_profiling_by_shape();
void set_op_profiling_by_shape(bool by_shape);
void record_op_time(const char* op, const std::string& shape, double seconds);
std::vector<OpTime> op_profile();  // sorted by time, largest first
void reset_op_profile();
// A table: op, calls, seconds, share of `total_seconds` (the share of the op total when 0), and
// the shape where one was recorded.
std::string format_op_profile(const std::vector<OpTime>& profile, double total_seconds = 0);

}  // namespace lathe
