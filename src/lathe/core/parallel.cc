#include "lathe/core/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lathe/core/error.h"

namespace lathe {
namespace {

thread_local bool inside_parallel_region = false;

// Workers wait for a new generation of work, run their task, and count down. Spinning briefly
// before sleeping keeps the latency of back-to-back small ops low.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) : thread_count_(threads) {
    for (int index = 1; index < threads; ++index) workers_.emplace_back([this, index] { worker_loop(index); });
  }

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
  }

  int thread_count() const { return thread_count_; }

  void run(FunctionRef<void(int, int)> task) {
    std::lock_guard<std::mutex> run_lock(run_mutex_);
    task_ = &task;
    error_ = nullptr;
    pending_.store(thread_count_ - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    run_task(0);
    while (pending_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run_task(int index) {
    inside_parallel_region = true;
    try {
      (*task_)(index, thread_count_);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    inside_parallel_region = false;
  }

  void worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t current = generation_.load(std::memory_order_acquire);
      for (int spin = 0; current == seen && spin < 20000; ++spin) {
        __builtin_ia32_pause();
        current = generation_.load(std::memory_order_acquire);
      }
      if (current == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
        current = generation_.load();
      }
      seen = current;
      if (stopping_) return;
      run_task(index);
      pending_.fetch_sub(1, std::memory_order_release);
    }
  }

  int thread_count_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  const FunctionRef<void(int, int)>* task_ = nullptr;
  std::exception_ptr error_;
  bool stopping_ = false;
};

constexpr int kMaxThreads = 1024;
int explicit_threads = 0;    // set_num_threads
int configured_threads = 0;  // set_configured_num_threads
std::unique_ptr<ThreadPool> pool;
std::mutex pool_mutex;

int environment_threads = -1;  // read once, at first use (parallel_for must not parse it per call)

int environment_threads_or_zero() {
  if (environment_threads < 0) {
    try {
      environment_threads = thread_count_from_environment();
    } catch (const Error&) {
      environment_threads = 0;  // the CLI reports it; a library user keeps the default
    }
  }
  return environment_threads;
}

// The count and its source, by the precedence of parallel.h. Caller holds pool_mutex.
int resolve_threads(const char** source) {
  if (explicit_threads > 0) return *source = "--threads", explicit_threads;
  if (int env = environment_threads_or_zero(); env > 0) return *source = "LATHE_NUM_THREADS", env;
  if (configured_threads > 0) return *source = "config", configured_threads;
  return *source = "affinity", available_cpus();
}

ThreadPool& get_pool() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  const char* source = nullptr;
  int threads = resolve_threads(&source);
  if (!pool || pool->thread_count() != threads) {
    pool.reset();
    pool = std::make_unique<ThreadPool>(threads);
  }
  return *pool;
}

}  // namespace

int available_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    const int count = CPU_COUNT(&mask);
    if (count > 0) return std::min(count, kMaxThreads);
  }
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxThreads)));
}

int thread_count_from_environment() {
  const char* env = std::getenv("LATHE_NUM_THREADS");
  if (!env || !*env) return 0;
  const std::string text = env;
  size_t used = 0;
  long value = -1;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LATHE_CHECK(used == text.size() && value >= 0 && value <= kMaxThreads,
              "LATHE_NUM_THREADS must be an integer between 0 (all available CPUs) and ", kMaxThreads, ", got '", text,
              "'");
  return static_cast<int>(value);
}

void set_num_threads(int threads) {
  LATHE_CHECK(threads >= 0 && threads <= kMaxThreads, "thread count must be between 0 (all available CPUs) and ",
              kMaxThreads, ", got ", threads);
  std::lock_guard<std::mutex> lock(pool_mutex);
  explicit_threads = threads;
}

void set_configured_num_threads(int threads) {
  LATHE_CHECK(threads >= 0 && threads <= kMaxThreads, "thread count must be between 0 (all available CPUs) and ",
              kMaxThreads, ", got ", threads);
  std::lock_guard<std::mutex> lock(pool_mutex);
  configured_threads = threads;
}

const char* num_threads_source() {
  std::lock_guard<std::mutex> lock(pool_mutex);
  const char* source = nullptr;
  resolve_threads(&source);
  return source;
}

int num_threads() { return get_pool().thread_count(); }

void parallel_run(FunctionRef<void(int, int)> fn) {
  if (inside_parallel_region) {
    fn(0, 1);
    return;
  }
  ThreadPool& threads = get_pool();
  if (threads.thread_count() == 1) {
    fn(0, 1);
    return;
  }
  threads.run(fn);
}

void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t max_chunks = (n + grain - 1) / grain;
  int threads = inside_parallel_region ? 1 : num_threads();
  int64_t chunks = std::min<int64_t>(threads, max_chunks);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  parallel_run([&](int thread_index, int) {
    if (thread_index >= chunks) return;
    int64_t begin = n * thread_index / chunks;
    int64_t end = n * (thread_index + 1) / chunks;
    if (begin < end) fn(begin, end);
  });
}

}  // namespace lathe
