// A persistent thread pool with static partitioning. parallel_for splits [0, n) into at most
// num_threads() contiguous chunks, chunk t always on thread t, so work assignment (and with it
// any per-chunk arithmetic order) depends only on n, grain and the thread count.
// Nested calls from inside a parallel region run serially on the calling thread.
#pragma once

#include <cstdint>

#include "lathe/core/function_ref.h"

namespace lathe {

// Threads used by parallel regions, chosen by the first of (highest precedence first):
//   1. set_num_threads(N > 0): an explicit choice (the CLI's --threads, tests);
//   2. the environment variable LATHE_NUM_THREADS (an integer > 0; 0 or malformed: ignored here,
//      the CLI reports a malformed one through thread_count_from_environment);
//   3. set_configured_num_threads(N > 0): a config's preference (train.threads) or a computed
//      default such as the data-parallel share of the cores;
//   4. the CPUs this process may run on (sched_getaffinity: taskset, cgroups cpusets, Slurm),
//      not the machine's core count.
// set_num_threads(0) and set_configured_num_threads(0) withdraw that level's choice.
void set_num_threads(int threads);
void set_configured_num_threads(int threads);
int num_threads();

// Where num_threads() comes from: "--threads", "LATHE_NUM_THREADS", "config" or "affinity".
const char* num_threads_source();

// CPUs in this process's affinity mask (at least 1; the hardware concurrency where unknown).
int available_cpus();

// LATHE_NUM_THREADS parsed strictly: 0 when unset or empty; throws lathe::Error naming the
// variable when it is not an integer in [0, 1024].
int thread_count_from_environment();

// Runs fn(begin, end) over disjoint chunks covering [0, n), each chunk at least `grain` long
// (except the last), in parallel. Returns after all chunks finish; rethrows a chunk's exception.
// fn is only referenced (FunctionRef): a lambda or any callable alive for the call.
void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t begin, int64_t end)> fn);

// Runs fn(thread_index, thread_count) once on each of num_threads() threads.
void parallel_run(FunctionRef<void(int thread_index, int thread_count)> fn);

}  // namespace lathe
