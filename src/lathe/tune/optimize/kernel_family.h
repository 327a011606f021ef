// The kernel families of `lathe optimize` (docs/optimizer.md): each covers some suite problems with
// one kernel template and its schedule space. The search (beam_search.h), the lab as its measure,
// the per-machine cache and the reports are shared; a family only says, for one problem:
//   - the schedule's fields and the naive start, which schedules are valid on this machine and
//     every schedule one granular step away (the moves);
//   - a predicted time under the measured peaks (its cost model; the search corrects it);
//   - the C++ source of a schedule against the lab's C ABI (and, where it supports promotion, as a
//     library kernel);
//   - its structural choice (GEMM: the packing form; rows: one-pass or two-pass), which the search
//     keeps diverse and corrects its model by separately;
//   - whether lathe's own path for the problem is a hand-tuned op kernel (then the report shows the
//     found kernel's time against it: the issue's >= 90%-of-hand-tuned target).
// Families: fused GEMM (fused_gemm_family.cc: the 35 fusion problems and the plain matmul
// large_gemm), row kernels (row_kernel_family.cc: rms_norm, softmax, layer_norm) and attention
// (attention_kernel_family.cc: causal flash attention forward, MHA and GQA).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lathe/bench/machine_peaks.h"
#include "lathe/core/json.h"
#include "lathe/ops/config.h"
#include "lathe/tune/optimize/schedule.h"

namespace lathe {

// A schedule of any family: named integer fields in the family's order.
struct Schedule {
  ConfigParams params;
  std::string key() const { return params.to_string(); }  // "vector_width=16,unroll=2,...": its identity
  Json to_json() const;
  int64_t get(const std::string& name) const;  // asserts the field exists
  bool operator==(const Schedule& other) const { return params == other.params; }
};

struct SpaceMove {
  std::string name;  // "unroll*2", "pack", "one-pass", ...
  Schedule schedule;
};

// One problem's kernel space (the problem and its shape are fixed when it is made).
class KernelSpace {
 public:
  virtual ~KernelSpace() = default;
  virtual Schedule naive() const = 0;
  virtual bool valid(const Schedule& schedule) const = 0;
  virtual std::vector<SpaceMove> moves(const Schedule& schedule) const = 0;
  virtual double predict_seconds(const Schedule& schedule, const MachinePeaks& peaks) const = 0;
  // Throws lathe::Error when library mode is asked of a family without promotion.
  virtual std::string source(const Schedule& schedule, bool library_mode) const = 0;
  // The library kernel `lathe optimize --emit` writes for `schedule` (searched on this machine)
  // over `existing`, the current file's text ("" when none): a family whose kernels hold a schedule
  // per ISA tier keeps the tiers of `existing` that this machine did not search.
  virtual std::string library_source(const Schedule& schedule, const std::string& existing) const {
    (void)existing;
    return source(schedule, true);
  }
  virtual bool promotable() const = 0;
  virtual int structure(const Schedule& schedule) const = 0;  // 0 .. structures() - 1
  virtual int structures() const = 0;
  // The lathe op whose hand-tuned kernel is lathe's path for the problem ("" when lathe's path is
  // a composition).
  virtual std::string hand_tuned_op() const = 0;
  // Parses "field=value,..." into a schedule of this space; throws naming the text when it is
  // malformed or outside the space.
  Schedule parse(const std::string& text) const;
};

struct KernelFamily {
  std::string name;  // "fused-gemm", "rows"
  std::vector<std::string> (*problems)();
  // shape: the suite problem's shape text at the size searched.
  std::unique_ptr<KernelSpace> (*make_space)(const std::string& problem, const std::string& shape,
                                             const ScheduleLimits& limits);
};

const std::vector<KernelFamily>& kernel_families();
// Every problem some family covers, family by family.
std::vector<std::string> optimizable_problems();
// The family covering `problem`; throws lathe::Error listing the covered problems when none does.
const KernelFamily& family_of(const std::string& problem);
std::unique_ptr<KernelSpace> make_kernel_space(const std::string& problem, const std::string& shape,
                                               const ScheduleLimits& limits);

// The families' own registrations (one file each).
KernelFamily fused_gemm_family();
KernelFamily row_kernel_family();
KernelFamily attention_kernel_family();

}  // namespace lathe
