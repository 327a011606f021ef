#include "lathe/launch/elastic_plan.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "lathe/core/error.h"

namespace lathe {

void validate_elastic_limits(const ElasticLimits& limits) {
  LATHE_CHECK(limits.min_nproc >= 1, "--min-nproc must be at least 1, got ", limits.min_nproc);
  LATHE_CHECK(limits.max_nproc >= limits.min_nproc, "--max-nproc ", limits.max_nproc, " is smaller than --min-nproc ",
              limits.min_nproc);
  LATHE_CHECK(limits.nproc >= limits.min_nproc && limits.nproc <= limits.max_nproc, "--nproc ", limits.nproc,
              " is outside --min-nproc ", limits.min_nproc, " .. --max-nproc ", limits.max_nproc);
}

std::optional<BatchPlan> plan_batch(int64_t batch_size, int64_t grad_accum, int world) {
  LATHE_ASSERT(batch_size >= 1 && grad_accum >= 1 && world >= 1);
  const int64_t global_batch = batch_size * grad_accum;
  if (global_batch % world != 0) return std::nullopt;
  const int64_t rows = global_batch / world;
  return BatchPlan{world, batch_size, grad_accum, (rows + batch_size - 1) / batch_size};
}

std::optional<BatchPlan> plan_world(const ElasticLimits& limits, int available, int64_t batch_size,
                                    int64_t grad_accum) {
  for (int world = std::min(available, limits.max_nproc); world >= limits.min_nproc; --world)
    if (auto plan = plan_batch(batch_size, grad_accum, world)) return plan;
  return std::nullopt;
}

ElasticCapacity::ElasticCapacity(int max_nproc, double cooldown_seconds, std::string capacity_file)
    : max_nproc_(max_nproc), cooldown_seconds_(cooldown_seconds), capacity_file_(std::move(capacity_file)) {}

void ElasticCapacity::slot_failed(double now) { cooling_until_.push_back(now + cooldown_seconds_); }

int ElasticCapacity::available(double now) const {
  int slots = max_nproc_;
  if (!capacity_file_.empty()) {
    std::ifstream file(capacity_file_);
    long long from_file = 0;
    if (file >> from_file) slots = static_cast<int>(std::clamp<long long>(from_file, 0, max_nproc_));
  }
  for (const double until : cooling_until_)
    if (until > now) --slots;
  return std::max(0, slots);
}

double ElasticCapacity::seconds_until_next_return(double now) const {
  double soonest = 0;
  for (const double until : cooling_until_)
    if (until > now && (soonest == 0 || until - now < soonest)) soonest = until - now;
  return soonest;
}

}  // namespace lathe
