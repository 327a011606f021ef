// The decisions of the elastic supervisor (`lathe launch`, launch/elastic_supervisor.h) that need no
// processes: how many workers to run with the capacity at hand, and the batch settings that keep
// the global batch (samples per optimizer step) identical at every world size.
//
// Batch: lathe's data parallelism (train/train_step.h) keeps the global batch
// G = train.batch_size * train.grad_accum in every world size: rank r trains G / W rows of each
// step in micro-batches of at most train.batch_size rows. So the supervisor passes the same
// train.batch_size and train.grad_accum to every group, and the gradient accumulation a rank does
// (its micro-batches per step, ceil(G / W / batch_size)) grows when the group shrinks and shrinks
// when it grows; activation memory per rank stays bounded by batch_size rows. A world size W is
// usable when it divides G.
// Capacity (simulated on one machine): max_nproc slots, less the slots that failed within the
// last `cooldown_seconds` (a failed slot is unavailable for that long, as a replaced machine would
// be), less what a capacity file says is missing (an integer: slots available now; absent or
// unreadable: all of them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lathe {

struct ElasticLimits {
  int nproc = 1;      // workers of the first launch
  int min_nproc = 1;  // fewer than this: wait for capacity
  int max_nproc = 1;  // never more than this
};

// Throws lathe::Error (one line naming the option) unless 1 <= min <= nproc <= max.
void validate_elastic_limits(const ElasticLimits& limits);

struct BatchPlan {
  int world = 1;
  int64_t batch_size = 1;              // train.batch_size (micro-batch rows per rank, at most)
  int64_t grad_accum = 1;              // train.grad_accum (batch_size * grad_accum = global batch)
  int64_t micro_batches_per_rank = 1;  // gradient accumulation steps of each rank
};

// The batch settings for `world` workers, or nullopt when world does not divide the global batch.
std::optional<BatchPlan> plan_batch(int64_t batch_size, int64_t grad_accum, int world);

// The largest usable world in [min_nproc, min(available, max_nproc)], or nullopt (wait).
std::optional<BatchPlan> plan_world(const ElasticLimits& limits, int available, int64_t batch_size, int64_t grad_accum);

// Slots that are available at `now` (seconds on any clock the failure times share).
class ElasticCapacity {
 public:
  ElasticCapacity(int max_nproc, double cooldown_seconds, std::string capacity_file);
  void slot_failed(double now);  // one slot is gone until now + cooldown
  int available(double now) const;
  // Seconds until the next cooling slot returns (0 when none is cooling).
  double seconds_until_next_return(double now) const;

 private:
  int max_nproc_;
  double cooldown_seconds_;
  std::string capacity_file_;
  std::vector<double> cooling_until_;
};

}  // namespace lathe
