// The row-kernel family of `lathe optimize` (kernel_family.h, docs/optimizer.md): row-wise
// reductions and norms, y[r, :] = f(x[r, :], stats(x[r, :])), one template for the suite's
// rms_norm, softmax and layer_norm problems. A RowSchedule is plain data like an op's Config:
// vector width / ISA, unroll (independent accumulators and vectors per iteration), one-pass or
// two-pass reduction (online softmax; shifted sum and sum of squares for LayerNorm), whether softmax keeps
// its exponentials in y (written by the sum pass, rescaled in place) or recomputes them, the
// threading split (contiguous row ranges, or dynamic tasks of rows_per_task rows) and
// non-temporal stores of y. The generator writes C++ against the kernel lab's C ABI
// (bench/lab/lathe_lab.h): inputs x (rows, dim) [, weight (dim) [, bias (dim)]], outputs
// y (rows, dim) [, per-row statistics (rows)], for any shape (the lab checks hidden ones).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/bench/machine_peaks.h"
#include "lathe/tune/optimize/schedule.h"

namespace lathe {

enum class RowKind { rms_norm, softmax, layer_norm };

// The problem's kernel description: its kind and constants (from the problem's definition and
// shape text: eps, softmax's scale, RMSNorm's weight offset, LayerNorm's bias).
struct RowKernel {
  std::string problem;
  RowKind kind = RowKind::rms_norm;
  int64_t rows = 0, dim = 0;  // the shape searched (the cost model's; the code is shape-generic)
  double eps = 1e-6, scale = 1, weight_offset = 0;
  bool bias = false;
};

// The suite problems of the family; row_kernel(problem, shape) throws lathe::Error for others.
std::vector<std::string> row_kernel_problems();
RowKernel row_kernel(const std::string& problem, const std::string& shape);

struct RowSchedule {
  int vector_width = 4;  // floats per vector: 16 (AVX-512), 8 (AVX2), 4 (SSE / portable)
  int unroll = 1;        // vectors per loop iteration, each with its own accumulator: 1, 2, 4, 8
  int passes = 2;        // 2: a separate pass per statistic; 1: one pass (online softmax, shifted sum + sum of squares)
  int store_exp = 0;     // softmax, two passes: 1 the sum pass writes exp to y, the last pass rescales y
  int thread_split = 0;  // 0: each thread a contiguous range of rows; 1: dynamic tasks of rows_per_task rows
  int rows_per_task = 8;  // 1 .. 1024, a power of two (thread_split 1)
  int nontemporal = 0;    // 1: y written with non-temporal (streaming) stores where aligned

  template <class Visitor>
  void visit(Visitor&& visitor) {
    visitor("vector_width", vector_width), visitor("unroll", unroll), visitor("passes", passes);
    visitor("store_exp", store_exp), visitor("thread_split", thread_split), visitor("rows_per_task", rows_per_task);
    visitor("nontemporal", nontemporal);
  }
};

bool row_schedule_valid(const RowKernel& kernel, const RowSchedule& schedule, const ScheduleLimits& limits);
// The naive start: SSE-wide vectors, no unroll, two passes, exponentials recomputed, contiguous
// row ranges, plain stores.
RowSchedule naive_row_schedule();
struct RowScheduleMove {
  std::string name;
  RowSchedule schedule;
};
// Every valid schedule one granular step away (only the steps that mean something for the kind).
std::vector<RowScheduleMove> row_schedule_moves(const RowKernel& kernel, const RowSchedule& schedule,
                                                const ScheduleLimits& limits);

// Lab-mode source (extern "C" lathe_candidate); row kernels are not promoted into the library.
std::string generate_row_kernel_source(const RowKernel& kernel, const RowSchedule& schedule);

// Predicted seconds: the bytes each pass moves over the bandwidth of the level it reads from (the
// first pass from where the whole working set fits, later passes from where one row fits; the
// suite's cache-aware rule, MachinePeaks::memory_gbytes), y's stores (read-for-ownership unless
// non-temporal; non-temporal stores go to DRAM even when y would fit in cache), the exponentials
// at a fraction of the f32 peak, the latency of each reduction's dependency chain per unroll, and
// the threads' imbalance and start-up.
double predict_row_kernel_seconds(const RowKernel& kernel, const RowSchedule& schedule, const MachinePeaks& peaks);

}  // namespace lathe
