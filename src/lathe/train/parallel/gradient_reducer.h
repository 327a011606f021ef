// Sums every parameter's gradient over the ranks of a data-parallel run, in buckets, overlapped
// with the backward pass of the step's last micro-batch.
//
// When is a gradient final? Every backward closure that contributes to a parameter holds a
// reference to its Var, and the tape releases each closure right after running it. So a parameter
// whose Var is referenced only by its owners again (the count taken before the forward) and that
// has received a contribution during this backward (VariableData::grad_contributions) will get no
// more: its gradient is final. Rematerialised layers fit too: their closures live on an inner tape
// that is gone by the time the outer node finishes. A parameter used both inside a rematerialised
// region and outside it could look final early; finish() checks that no contribution arrived after
// a parameter was handed on and fails loudly (an internal error) if one did.
//
// Final parameters are appended, in the order they became final, to the open bucket; once it
// holds bucket_bytes it goes to the reducer's thread, which packs the gradients into one buffer,
// all-reduces it (sum) and unpacks, while the trainer thread continues with the backward pass.
// On a GPU the bucket lives in device memory and goes to the communicator as a device tensor
// (NCCL, or staged through the host: dist/communicator.h).
// Gradients are summed, not averaged: the loss of each micro-batch is already weighted by its rows
// over the global batch (train/train_step.h).
//
// The bucket layout depends only on the model and the tape, so it is the same on every rank and
// every step, and the summed gradients are bitwise reproducible for a given world size.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "lathe/autograd/tape.h"
#include "lathe/dist/communicator.h"
#include "lathe/models/transformer.h"

namespace lathe {

struct GradientReducerOptions {
  int64_t bucket_bytes = 4 << 20;
  bool overlap = true;  // false: every bucket is reduced by finish(), after backward
};

// Time and volume of the last step's reduction.
struct GradientReductionStats {
  int64_t buckets = 0;
  int64_t buckets_during_backward = 0;  // handed to the reducer thread before finish()
  int64_t bytes = 0;                    // gradient bytes all-reduced per rank
  double communication_seconds = 0;     // packing + all-reduce + unpacking, summed over buckets
  double exposed_seconds = 0;           // of which the trainer waited for in finish()
  // Share of the communication hidden behind backward, in [0, 1]. The exposed time also counts
  // waiting for the reducer thread to be scheduled and for slower ranks, so it can exceed the
  // communication itself (then 0).
  double overlap_fraction() const {
    if (communication_seconds <= 0) return 0.0;
    return std::clamp(1.0 - exposed_seconds / communication_seconds, 0.0, 1.0);
  }
};

class GradientReducer {
 public:
  GradientReducer(std::vector<Parameter>& parameters, Communicator& communicator, GradientReducerOptions options);
  ~GradientReducer();  // stops the thread
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Step protocol, around the last micro-batch: before_forward(); forward; watch(tape);
  // tape.backward(); finish(). Gradients of earlier micro-batches just accumulate locally.
  void before_forward();
  void watch(autograd::Tape& tape);
  // Reduces what is left and waits for every bucket; afterwards every rank holds the summed gradients.
  void finish();

  const GradientReductionStats& last_stats() const { return stats_; }

 private:
  void check_for_final_gradients();
  void close_bucket();
  void reduce_bucket(const std::vector<int>& bucket);
  void run_thread();

  std::vector<Parameter>& parameters_;
  Communicator& communicator_;
  GradientReducerOptions options_;

  // Per step, on the trainer thread.
  std::vector<long> baseline_use_count_;
  std::vector<int64_t> contributions_before_, contributions_when_final_;
  std::vector<int> pending_;  // parameters whose gradient is not final yet
  std::vector<int> open_bucket_;
  int64_t open_bucket_bytes_ = 0;
  GradientReductionStats stats_;

  // Shared with the reducer thread.
  std::mutex mutex_;
  std::condition_variable work_ready_, work_done_;
  std::deque<std::vector<int>> queue_;
  bool busy_ = false, stopping_ = false;
  double thread_seconds_ = 0;
  Tensor buffer_;  // the packed bucket, on the gradients' device (grown to the largest bucket)
  std::thread thread_;
};

}  // namespace lathe
