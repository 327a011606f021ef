// The decisions of the elastic supervisor (`lathe launch`, dist/elastic_supervisor.h) that need no
// processes: how many workers to run with the capacity at hand, and the batch settings that keep
// the global batch (samples per optimizer step) identical at every world size.
//
// Batch: the global batch is train.batch_size * train.grad_accum in every world size
// (train/data_parallel_step.h: rank r trains its global/world rows in micro-batches of at most
// batch_size). The supervisor keeps the global batch and the rows per rank of each micro-batch of
// the first launch (its activation memory) and changes grad_accum: world W runs batch_size =
// rows * W and grad_accum = global / batch_size, so each rank still takes `rows` rows per
// micro-batch. When that does not divide, it picks the batch_size nearest to rows * W that is a
// multiple of W and divides the global batch; a world size with none is not used.
//
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
  int64_t batch_size = 1;  // train.batch_size for this world (all ranks together)
  int64_t grad_accum = 1;  // train.grad_accum
};

// The batch settings for `world` workers that keep global_batch = batch_size * grad_accum, or
// nullopt when no batch_size divisible by world divides global_batch. rows_per_rank: of the first
// launch (>= 1).
std::optional<BatchPlan> plan_batch(int64_t global_batch, int64_t rows_per_rank, int world);

// The largest usable world in [min_nproc, min(available, max_nproc)], or nullopt (wait).
std::optional<BatchPlan> plan_world(const ElasticLimits& limits, int available, int64_t global_batch,
                                    int64_t rows_per_rank);

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
