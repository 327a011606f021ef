// The trainer's chores under data parallelism (train/trainer.cc), kept out of the training loop:
// who prints, who builds shared files first, how many threads a rank gets, agreeing on a stop,
// and ending the job when one rank fails. All are trivial for a single process.
#pragma once

#include <cstdio>
#include <functional>
#include <ostream>
#include <string>

#include "lathe/bench/machine_peaks.h"
#include "lathe/core/error.h"
#include "lathe/dist/communicator.h"
#include "lathe/train/parallel/data_parallel_share.h"

namespace lathe {

// Streams that swallow everything (the progress log and warnings of ranks other than 0).
std::FILE* discarded_output();
std::ostream& discarded_stream();

// Worker threads for one rank when train.threads is 0: the machine's cores shared by the ranks
// on it (at least 1).
int threads_per_rank(const Communicator& communicator);

// Runs `work` on rank 0, then on the other ranks (collective): for work that creates files the
// others then reuse (token shard cache). When rank 0 fails its error is rethrown there and the
// other ranks throw a short "rank 0 failed" error instead of waiting forever.
void run_on_rank_0_first(Communicator& communicator, const std::function<void()>& work);

// True on every rank when `value` is true on any (collective).
bool any_rank_true(Communicator& communicator, bool value);

// Rank 0 measures the machine's peaks with its threads and shares them (collective). The f32 and
// bf16 peaks are scaled by the world size: the ranks together use world x the threads of one
// (MFU of a data-parallel run is global tokens/s against that total).
MachinePeaks measure_machine_peaks_once(Communicator& communicator);

// "data parallel: 2 ranks over MPI (Open MPI v4.1.4), 1 thread each; each rank trains 4 of the 8
// sequences of a step (1 micro-batch of 4); gradient buckets of 4 MB, overlapped with backward"
std::string describe_data_parallel_run(const DataParallelShare& share, const Communicator& communicator,
                                       const TrainConfig& config);

// After an error during a data-parallel run: rank 0 prints "lathe train: error: <message>" at once;
// another rank waits a second (when every rank failed alike, rank 0's abort ends it first, so the
// message appears once) and prints "lathe train: error: rank N: <message>". Then it ends every
// process of the job with exit code 2 (MPI_Abort, whose notice mpirun adds).
[[noreturn]] void end_data_parallel_run_with_error(Communicator& communicator, const std::string& message);

}  // namespace lathe
