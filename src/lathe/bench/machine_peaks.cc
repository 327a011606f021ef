#include "lathe/bench/machine_peaks.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "lathe/bench/timing.h"
#include "lathe/core/aligned_buffer.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/parallel.h"

namespace lathe {

namespace avx512 {
float fma_throughput_loop(long iterations, int* vector_width);
float bf16_dot_throughput_loop(long iterations);
}  // namespace avx512
namespace avx2 {
float fma_throughput_loop(long iterations, int* vector_width);
}
namespace scalar {
float fma_throughput_loop(long iterations, int* vector_width);
}

namespace {

volatile float checksum_sink;

// Best-of-5 rate of `work_per_thread` flops run on every thread. All threads meet at a barrier
// before the clock starts, so a worker that wakes late does not turn the measurement into two
// half-overlapping runs (which reads as half the machine).
template <class Loop>
double measure_rate(Loop&& loop, double work_per_thread) {
  double best = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::atomic<int> arrived{0};
    double start = 0;
    parallel_run([&](int thread_index, int thread_count) {
      arrived.fetch_add(1);
      while (arrived.load() < thread_count) {
      }
      if (thread_index == 0) start = now_seconds();
      checksum_sink = loop();
    });
    double elapsed = now_seconds() - start;
    best = std::max(best, work_per_thread * num_threads() / elapsed);
  }
  return best;
}

}  // namespace

double MachinePeaks::floor_seconds(double flops, double bytes, bool bf16_compute) const {
  double peak = (bf16_compute && bf16_gflops > 0 ? bf16_gflops : f32_gflops) * 1e9;
  double compute = peak > 0 ? flops / peak : 0;
  double memory = copy_gbytes > 0 ? bytes / (copy_gbytes * 1e9) : 0;
  return std::max(compute, memory);
}

Json MachinePeaks::to_json() const {
  Json json = Json::object();
  json.set("f32_gflops", f32_gflops);
  json.set("bf16_gflops", bf16_gflops);
  json.set("copy_gbytes_per_second", copy_gbytes);
  json.set("threads", threads);
  json.set("isa", isa);
  return json;
}

MachinePeaks measure_machine_peaks(bool quick) {
  MachinePeaks peaks;
  peaks.threads = num_threads();
  const long iterations = quick ? 1000000 : 10000000;  // ~20 ms per attempt at full speed
  const int accumulators = 12;
  Isa isa = active_isa();
  // Each thread reports the vector width into its own variable; the first call learns it.
  auto f32_loop = [&]() -> float {
    int vector_width = 1;
    return isa >= Isa::avx512 ? avx512::fma_throughput_loop(iterations, &vector_width)
           : isa >= Isa::avx2 ? avx2::fma_throughput_loop(iterations, &vector_width)
                              : scalar::fma_throughput_loop(iterations, &vector_width);
  };
  int width = 1;
  isa >= Isa::avx512 ? avx512::fma_throughput_loop(1, &width)
  : isa >= Isa::avx2 ? avx2::fma_throughput_loop(1, &width)
                     : scalar::fma_throughput_loop(1, &width);
  peaks.isa = isa >= Isa::avx512 ? "avx512" : isa_name(isa);
  peaks.f32_gflops = measure_rate(f32_loop, 2.0 * width * accumulators * iterations) / 1e9;
  if (isa >= Isa::avx512_bf16) {
    peaks.bf16_gflops =
        measure_rate([&] { return avx512::bf16_dot_throughput_loop(iterations); }, 64.0 * accumulators * iterations) / 1e9;
  }
  // Bandwidth well beyond the last-level cache, as the best of two passes whose counted bytes
  // (read + written) are what the memory system moves: a copy (its destination lines are also
  // read for ownership, so it understates by up to 1.5x) and an in-place read-modify-write (reads
  // and writes the same lines, as optimizer updates and in-place kernels do).
  const size_t bytes = quick ? (64u << 20) : (256u << 20);
  AlignedBuffer source(bytes), destination(bytes);
  std::memset(source.as<char>(), 1, bytes);
  std::memset(destination.as<char>(), 0, bytes);
  const int64_t pages = static_cast<int64_t>(bytes / 4096);
  double best = 0;
  for (int attempt = 0; attempt < (quick ? 3 : 6); ++attempt) {
    double start = now_seconds();
    parallel_for(pages, 256, [&](int64_t begin, int64_t end) {
      std::memcpy(destination.as<char>() + begin * 4096, source.as<char>() + begin * 4096, (end - begin) * 4096);
    });
    best = std::max(best, 2.0 * static_cast<double>(bytes) / (now_seconds() - start));
    start = now_seconds();
    parallel_for(pages, 256, [&](int64_t begin, int64_t end) {
      uint64_t* words = destination.as<uint64_t>() + begin * 512;
      for (int64_t i = 0; i < (end - begin) * 512; ++i) words[i] += 1;
    });
    best = std::max(best, 2.0 * static_cast<double>(bytes) / (now_seconds() - start));
  }
  peaks.copy_gbytes = best / 1e9;
  return peaks;
}

}  // namespace lathe
