// The attention family of `lathe optimize` (kernel_family.h): the schedule space of
// attention_kernel_generator.h as a KernelSpace. Not promoted: lathe's path for these problems is
// its hand-tuned flash_attention op, and the search's purpose is the target of reaching
// >= 90% of it from a naive start.
#include "lathe/tune/optimize/attention_kernel_generator.h"
#include "lathe/tune/optimize/kernel_family.h"

namespace lathe {

namespace {

AttentionSchedule typed(const Schedule& schedule) {
  return config_from_params<AttentionSchedule>(schedule.params, "attention schedule");
}
Schedule generic(const AttentionSchedule& schedule) { return {config_to_params(schedule)}; }

class AttentionKernelSpace : public KernelSpace {
 public:
  AttentionKernelSpace(AttentionKernel kernel, ScheduleLimits limits) : kernel_(std::move(kernel)), limits_(limits) {}

  Schedule naive() const override { return generic(naive_attention_schedule()); }
  bool valid(const Schedule& schedule) const override {
    try {
      return attention_schedule_valid(typed(schedule), limits_);
    } catch (const Error&) {
      return false;
    }
  }
  std::vector<SpaceMove> moves(const Schedule& schedule) const override {
    std::vector<SpaceMove> moves;
    for (const auto& move : attention_schedule_moves(typed(schedule), limits_))
      moves.push_back({move.name, generic(move.schedule)});
    return moves;
  }
  double predict_seconds(const Schedule& schedule, const MachinePeaks& peaks) const override {
    return predict_attention_kernel_seconds(kernel_, typed(schedule), peaks);
  }
  std::string source(const Schedule& schedule, bool library_mode) const override {
    LATHE_CHECK(!library_mode, "lathe optimize: promotion covers the fusion problems; ", kernel_.problem,
                " is an attention kernel, whose lathe path is the flash_attention op's own kernel");
    return generate_attention_kernel_source(kernel_, typed(schedule));
  }
  bool promotable() const override { return false; }
  // Structure: how scores are formed (dot products, or broadcast tiles over transposed keys).
  int structure(const Schedule& schedule) const override { return static_cast<int>(schedule.get("pack_k")); }
  int structures() const override { return 2; }
  std::string hand_tuned_op() const override { return "flash_attention"; }

 private:
  AttentionKernel kernel_;
  ScheduleLimits limits_;
};

std::unique_ptr<KernelSpace> make_space(const std::string& problem, const std::string& shape,
                                        const ScheduleLimits& limits) {
  return std::make_unique<AttentionKernelSpace>(attention_kernel(problem, shape), limits);
}

}  // namespace

KernelFamily attention_kernel_family() { return {"attention", attention_kernel_problems, make_space}; }

}  // namespace lathe
