// The row-kernel family of `lathe optimize` (kernel_family.h): the schedule space of
// row_kernel_generator.h as a KernelSpace, and its cost model.
#include <algorithm>
#include <cmath>

#include "lathe/tune/optimize/kernel_family.h"
#include "lathe/tune/optimize/row_kernel_generator.h"

namespace lathe {

double predict_row_kernel_seconds(const RowKernel& k, const RowSchedule& s, const MachinePeaks& peaks) {
  const double rows = static_cast<double>(std::max<int64_t>(k.rows, 1));
  const double dim = static_cast<double>(std::max<int64_t>(k.dim, 1));
  const double elements = rows * dim, row_bytes = dim * 4;
  const int threads = std::max(1, peaks.threads);
  const double working_set = 2 * elements * 4;  // x and y
  auto bandwidth = [&](double bytes) { return std::max(1.0, peaks.memory_gbytes(bytes, false)) * 1e9; };
  const double first_read = bandwidth(working_set), dram = bandwidth(1e15);
  const bool fits_in_cache = first_read > dram * 1.2;
  // Passes over each row: the first streams x from where the working set lives, the others
  // re-read the row (or y's exponentials) from the level one row fits in.
  const bool two_pass = s.passes == 2 && k.kind != RowKind::rms_norm;
  const int passes = 1 + (two_pass ? 1 : 0) + 1;  // statistics (one or two), then the map writing y
  const double row_level = bandwidth(row_bytes * (1 + s.store_exp) * threads);
  double memory = elements * 4 / first_read + (passes - 1) * elements * 4 / row_level;
  // y: a plain store reads the line first (read for ownership) unless the data stays in cache;
  // a non-temporal store skips that but always goes to DRAM.
  if (s.nontemporal == 1)
    memory += elements * 4 / dram;
  else
    memory += elements * 4 * (fits_in_cache ? 1 : 2) / first_read;
  if (s.store_exp == 1) memory += elements * 4 / row_level;  // the exponentials written, read again in cache
  // Compute: vector operations at the width's share of the f32 peak; an exponential is ~20 of them.
  const double lanes_per_second = std::max(1.0, peaks.f32_gflops) * 1e9 / 2 * std::min(1.0, s.vector_width / 16.0);
  double exps = 0;
  if (k.kind == RowKind::softmax) exps = s.passes == 1 ? 3 : s.store_exp == 1 ? 1 : 2;
  double compute = elements * (exps * 20 + passes * 3) / lanes_per_second;
  // Latency: each reduction is a chain of vector adds (4 cycles; an online step with its exps ~40)
  // that `unroll` independent accumulators overlap, on the clock the f32 peak implies
  // (2 FMA units x 16 lanes x 2 flops per cycle and thread).
  const double hertz = std::max(1.0, peaks.f32_gflops) * 1e9 / threads / 64;
  const double chain_cycles = (k.kind == RowKind::softmax && s.passes == 1) ? 40 : 4;
  const double reductions = k.kind == RowKind::rms_norm ? 1 : two_pass ? 2 : 1;
  const double vectors = std::ceil(dim / s.vector_width) * rows;
  compute = std::max(compute, reductions * vectors * chain_cycles / s.unroll / hertz / threads);
  double seconds = std::max(memory, compute) + 0.25 * std::min(memory, compute);
  // Threads: imbalance of contiguous ranges, or the dynamic tasks' last task and counter traffic.
  if (s.thread_split == 0) {
    seconds *= std::ceil(rows / threads) * threads / rows;
  } else {
    const double tasks = std::ceil(rows / s.rows_per_task);
    seconds *= 1 + 0.5 * std::min(1.0, threads / tasks);
    seconds += tasks * 0.2e-6 / threads;
  }
  return seconds + 30e-6;  // starting the threads
}

namespace {

RowSchedule typed(const Schedule& schedule) {
  return config_from_params<RowSchedule>(schedule.params, "row-kernel schedule");
}
Schedule generic(const RowSchedule& schedule) { return {config_to_params(schedule)}; }

class RowKernelSpace : public KernelSpace {
 public:
  RowKernelSpace(RowKernel kernel, ScheduleLimits limits) : kernel_(std::move(kernel)), limits_(limits) {}

  Schedule naive() const override {
    RowSchedule start = naive_row_schedule();
    if (kernel_.kind == RowKind::rms_norm) start.passes = 1;  // one statistic: one pass
    return generic(start);
  }
  bool valid(const Schedule& schedule) const override {
    try {
      return row_schedule_valid(kernel_, typed(schedule), limits_);
    } catch (const Error&) {
      return false;
    }
  }
  std::vector<SpaceMove> moves(const Schedule& schedule) const override {
    std::vector<SpaceMove> moves;
    for (const auto& move : row_schedule_moves(kernel_, typed(schedule), limits_))
      moves.push_back({move.name, generic(move.schedule)});
    return moves;
  }
  double predict_seconds(const Schedule& schedule, const MachinePeaks& peaks) const override {
    return predict_row_kernel_seconds(kernel_, typed(schedule), peaks);
  }
  std::string source(const Schedule& schedule, bool library_mode) const override {
    LATHE_CHECK(!library_mode, "lathe optimize: promotion covers the fusion problems; ", kernel_.problem,
                " is a row kernel, whose lathe path is its op's own kernel");
    return generate_row_kernel_source(kernel_, typed(schedule));
  }
  bool promotable() const override { return false; }
  int structure(const Schedule& schedule) const override { return static_cast<int>(schedule.get("passes")) - 1; }
  int structures() const override { return kernel_.kind == RowKind::rms_norm ? 1 : 2; }
  std::string hand_tuned_op() const override { return kernel_.problem; }  // each problem is its op's own

 private:
  RowKernel kernel_;
  ScheduleLimits limits_;
};

std::unique_ptr<KernelSpace> make_space(const std::string& problem, const std::string& shape,
                                        const ScheduleLimits& limits) {
  return std::make_unique<RowKernelSpace>(row_kernel(problem, shape), limits);
}

}  // namespace

KernelFamily row_kernel_family() { return {"rows", row_kernel_problems, make_space}; }

}  // namespace lathe
