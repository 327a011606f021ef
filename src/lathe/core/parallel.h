// A persistent thread pool with static partitioning. parallel_for splits [0, n) into at most
// num_threads() contiguous chunks, chunk t always on thread t, so work assignment (and with it
// any per-chunk arithmetic order) depends only on n, grain and the thread count.
// Nested calls from inside a parallel region run serially on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace lathe {

// Threads used by parallel regions. 0 means the hardware concurrency. The first use reads
// LATHE_NUM_THREADS from the environment.
void set_num_threads(int threads);
int num_threads();

// Runs fn(begin, end) over disjoint chunks covering [0, n), each chunk at least `grain` long
// (except the last), in parallel. Returns after all chunks finish; rethrows a chunk's exception.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

// Runs fn(thread_index, thread_count) once on each of num_threads() threads.
void parallel_run(const std::function<void(int thread_index, int thread_count)>& fn);

}  // namespace lathe
