#include "lathe/bench/machine_peaks.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "lathe/bench/timing.h"
#include "lathe/core/aligned_buffer.h"
#include "lathe/core/amx.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/error.h"
#include "lathe/core/parallel.h"

namespace lathe {

namespace avx512 {
float fma_throughput_loop(long iterations, int* vector_width);
float bf16_dot_throughput_loop(long iterations);
float stream_update_loop(float* data, long count, long repeats);
float stream_read_loop(const float* data, long count, long repeats);
}  // namespace avx512
namespace avx2 {
float fma_throughput_loop(long iterations, int* vector_width);
float stream_update_loop(float* data, long count, long repeats);
float stream_read_loop(const float* data, long count, long repeats);
}  // namespace avx2
namespace scalar {
float fma_throughput_loop(long iterations, int* vector_width);
float stream_update_loop(float* data, long count, long repeats);
float stream_read_loop(const float* data, long count, long repeats);
}  // namespace scalar

namespace {

volatile float checksum_sink;

// Best-of-`attempts` rate of `work_per_thread` units run on every thread (loop(thread_index)). All threads meet at a
// barrier before the clock starts, so a worker that wakes late does not turn the measurement into two half-overlapping
// runs (which reads as half the machine).
template <class Loop>
double measure_rate(Loop&& loop, double work_per_thread, int attempts = 5) {
  double best = 0;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    std::atomic<int> arrived{0};
    double start = 0;
    parallel_run([&](int thread_index, int thread_count) {
      arrived.fetch_add(1);
      while (arrived.load() < thread_count) {
      }
      if (thread_index == 0) start = now_seconds();
      checksum_sink = loop(thread_index);
    });
    double elapsed = now_seconds() - start;
    best = std::max(best, work_per_thread * num_threads() / elapsed);
  }
  return best;
}

// "32K", "1024K", "32M" -> bytes; 0 when unreadable.
int64_t parse_cache_size(const std::string& text) {
  std::istringstream in(text);
  int64_t value = 0;
  char unit = 0;
  if (!(in >> value)) return 0;
  in >> unit;
  return unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : unit == 'G' ? value << 30 : value;
}

// "0-1,4,6-7" -> 5.
int count_cpu_list(const std::string& text) {
  int count = 0;
  std::istringstream in(text);
  std::string range;
  while (std::getline(in, range, ',')) {
    int first = 0, last = 0;
    char dash = 0;
    std::istringstream part(range);
    if (!(part >> first)) continue;
    last = (part >> dash >> last) ? last : first;
    count += std::max(0, last - first + 1);
  }
  return std::max(1, count);
}

std::string read_line(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

std::vector<CacheLevel> sysfs_cache_levels() {
  std::vector<CacheLevel> levels;
  for (int index = 0; index < 16; ++index) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::string type = read_line(dir + "type");
    if (type.empty()) break;
    if (type == "Instruction") continue;
    CacheLevel level;
    std::string number = read_line(dir + "level");
    level.name = "L" + number + (number == "1" ? "d" : "");
    level.size_bytes = parse_cache_size(read_line(dir + "size"));
    level.shared_by = count_cpu_list(read_line(dir + "shared_cpu_list"));
    if (level.size_bytes > 0) levels.push_back(level);
  }
  return levels;
}

std::vector<CacheLevel> sysconf_cache_levels() {
  std::vector<CacheLevel> levels;
  const struct {
    const char* name;
    int key;
    bool shared;
  } keys[] = {{"L1d", _SC_LEVEL1_DCACHE_SIZE, false},
              {"L2", _SC_LEVEL2_CACHE_SIZE, false},
              {"L3", _SC_LEVEL3_CACHE_SIZE, true}};
  for (const auto& key : keys) {
    long size = sysconf(key.key);
    if (size <= 0) continue;
    // sysconf does not say who shares a level: the last level is taken as shared by every CPU.
    levels.push_back(
        {key.name, size, key.shared ? static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))) : 1, 0, 0});
  }
  return levels;
}

// Per-thread buffers of half the level's per-thread capacity, each streamed (update, then read)
// by its own thread; the best rate of either pattern over 3 attempts.
double measure_level_bandwidth(const CacheLevel& level, Isa isa, bool quick) {
  const int threads = num_threads();
  const long floats = std::max<long>(1024, (level.bytes_per_thread / 2) / 4096 * 1024);
  const long repeats = std::max<long>(1, (quick ? (8l << 20) : (64l << 20)) / (floats * 4));
  std::vector<AlignedBuffer> buffers(threads);
  parallel_run([&](int thread_index, int) {
    buffers[thread_index] = AlignedBuffer(floats * sizeof(float));
    std::fill(buffers[thread_index].as<float>(), buffers[thread_index].as<float>() + floats, 1.0f);
  });
  auto update = [&](int thread_index) -> float {
    float* data = buffers[thread_index].as<float>();
    return isa >= Isa::avx512 ? avx512::stream_update_loop(data, floats, repeats)
           : isa >= Isa::avx2 ? avx2::stream_update_loop(data, floats, repeats)
                              : scalar::stream_update_loop(data, floats, repeats);
  };
  auto read = [&](int thread_index) -> float {
    const float* data = buffers[thread_index].as<float>();
    return isa >= Isa::avx512 ? avx512::stream_read_loop(data, floats, repeats)
           : isa >= Isa::avx2 ? avx2::stream_read_loop(data, floats, repeats)
                              : scalar::stream_read_loop(data, floats, repeats);
  };
  double moved = 4.0 * static_cast<double>(floats) * static_cast<double>(repeats);
  return std::max(measure_rate(update, 2 * moved, 3), measure_rate(read, moved, 3)) / 1e9;
}

}  // namespace

std::vector<CacheLevel> detect_cache_levels(int threads, std::string* source) {
  std::vector<CacheLevel> from_sysfs = sysfs_cache_levels(), from_sysconf = sysconf_cache_levels();
  std::vector<CacheLevel> levels = from_sysfs.empty() ? from_sysconf : from_sysfs;
  std::string where = from_sysfs.empty() ? (from_sysconf.empty() ? "none" : "sysconf") : "sysfs";
  // Where the two disagree, the smaller size is used: an overstated size would measure the level
  // with a buffer that does not fit in it, understating its bandwidth and raising every floor.
  for (auto& level : levels)
    for (const auto& other : from_sysconf)
      if (!from_sysfs.empty() && other.name == level.name && other.size_bytes != level.size_bytes) {
        where = "sysfs (sysconf differs; the smaller size is used unless the larger measures as cache)";
        level.larger_claim_bytes = std::max(level.size_bytes, other.size_bytes);
        level.size_bytes = std::min(level.size_bytes, other.size_bytes);
      }
  for (auto& level : levels)
    level.bytes_per_thread = level.size_bytes / std::max(1, std::min(level.shared_by, std::max(1, threads)));
  std::sort(levels.begin(), levels.end(),
            [](const CacheLevel& a, const CacheLevel& b) { return a.size_bytes < b.size_bytes; });
  if (source) *source = where;
  return levels;
}

double MachinePeaks::memory_gbytes(double bytes, bool cold, std::string* level) const {
  if (level) *level = "DRAM";
  const double dram = std::max(copy_gbytes, dram_stream_gbytes);
  if (cold) return dram;
  double per_thread = bytes / std::max(1, threads);
  // Walk from DRAM down, keeping the running maximum, so a level never reads slower than a larger one.
  double bandwidth = dram;
  std::string chosen = "DRAM";
  for (auto it = caches.rbegin(); it != caches.rend(); ++it) {
    if (per_thread > static_cast<double>(it->bytes_per_thread)) break;
    bandwidth = std::max(bandwidth, it->gbytes);
    chosen = it->name;
  }
  if (level) *level = chosen;
  return bandwidth;
}

double MachinePeaks::bf16_matmul_gflops() const {
  if (amx_gflops > 0 && amx_active()) return amx_gflops;
  return bf16_gflops > 0 ? bf16_gflops : f32_gflops;
}

double MachinePeaks::floor_seconds(double flops, double bytes, bool bf16_compute, bool cold) const {
  double peak = (bf16_compute ? bf16_matmul_gflops() : f32_gflops) * 1e9;
  double compute = peak > 0 ? flops / peak : 0;
  double bandwidth = memory_gbytes(bytes, cold);
  double memory = bandwidth > 0 ? bytes / (bandwidth * 1e9) : 0;
  return std::max(compute, memory);
}

double mixed_work_peak_gflops(const MachinePeaks& peaks, double flops, double bf16_flops) {
  const double bf16_peak = peaks.bf16_matmul_gflops(), f32_peak = peaks.f32_gflops;
  bf16_flops = std::clamp(bf16_flops, 0.0, flops);
  const double seconds = (bf16_flops > 0 && bf16_peak > 0 ? bf16_flops / bf16_peak : 0.0) +
                         (f32_peak > 0 ? (flops - bf16_flops) / f32_peak : 0.0);
  return seconds > 0 ? flops / seconds : 0.0;
}

void hold_vector_peaks_to_their_ratio(MachinePeaks& peaks) {
  if (peaks.bf16_dot_speedup <= 0) return;
  peaks.bf16_gflops = std::max(peaks.bf16_gflops, peaks.f32_gflops * peaks.bf16_dot_speedup);
  peaks.f32_gflops = std::max(peaks.f32_gflops, peaks.bf16_gflops / peaks.bf16_dot_speedup);
}

double capped_utilisation(double achieved_gflops, double peak_gflops, bool* capped) {
  const double ratio = peak_gflops > 0 ? achieved_gflops / peak_gflops : 0.0;
  if (capped) *capped = ratio > 1.0;
  return std::min(ratio, 1.0);
}

MachinePeaks higher_peaks(const MachinePeaks& a, const MachinePeaks& b) {
  MachinePeaks peaks = a;
  peaks.f32_gflops = std::max(a.f32_gflops, b.f32_gflops);
  peaks.bf16_gflops = std::max(a.bf16_gflops, b.bf16_gflops);
  peaks.amx_gflops = std::max(a.amx_gflops, b.amx_gflops);
  peaks.bf16_dot_speedup = std::max(a.bf16_dot_speedup, b.bf16_dot_speedup);
  peaks.copy_gbytes = std::max(a.copy_gbytes, b.copy_gbytes);
  peaks.dram_stream_gbytes = std::max(a.dram_stream_gbytes, b.dram_stream_gbytes);
  for (auto& level : peaks.caches)
    for (const auto& other : b.caches)
      if (other.name == level.name) level.gbytes = std::max(level.gbytes, other.gbytes);
  return peaks;
}

Json MachinePeaks::to_json() const {
  Json json = Json::object();
  json.set("f32_gflops", f32_gflops);
  json.set("bf16_gflops", bf16_gflops);
  json.set("amx_gflops", amx_gflops);
  json.set("bf16_dot_speedup", bf16_dot_speedup);
  json.set("copy_gbytes_per_second", copy_gbytes);
  json.set("dram_stream_gbytes_per_second", dram_stream_gbytes);
  Json levels = Json::array();
  for (const auto& level : caches) {
    Json entry = Json::object();
    entry.set("name", level.name);
    entry.set("size_bytes", level.size_bytes);
    entry.set("shared_by", level.shared_by);
    entry.set("bytes_per_thread", level.bytes_per_thread);
    entry.set("gbytes_per_second", level.gbytes);
    levels.push(entry);
  }
  json.set("caches", levels);
  json.set("cache_source", cache_source);
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
  auto f32_loop = [&](int) -> float {
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
    peaks.bf16_gflops = measure_rate([&](int) { return avx512::bf16_dot_throughput_loop(iterations); },
                                     64.0 * accumulators * iterations) /
                        1e9;
  }
  if (isa >= Isa::avx512_bf16) {
    const long alternated_iterations = quick ? 100000 : 400000;
    double best_f32 = 0, best_bf16 = 0;
    for (int round = 0; round < 9; ++round) {
      int vector_width = 1;
      double start = now_seconds();
      checksum_sink = avx512::fma_throughput_loop(alternated_iterations, &vector_width);
      const double f32_seconds = now_seconds() - start;
      start = now_seconds();
      checksum_sink = avx512::bf16_dot_throughput_loop(alternated_iterations);
      const double bf16_seconds = now_seconds() - start;
      if (f32_seconds > 0)
        best_f32 = std::max(best_f32, 2.0 * vector_width * accumulators * alternated_iterations / f32_seconds);
      if (bf16_seconds > 0) best_bf16 = std::max(best_bf16, 64.0 * accumulators * alternated_iterations / bf16_seconds);
    }
    peaks.bf16_dot_speedup = best_f32 > 0 ? best_bf16 / best_f32 : 0;
    hold_vector_peaks_to_their_ratio(peaks);
  }
  if (amx_active()) {  // a tdpbf16ps does 16384 flops: fewer iterations for the same time
    const long tile_iterations = std::max(1000L, iterations / 40);
    peaks.amx_gflops = measure_rate([&](int) { return amx_tile_throughput_loop(tile_iterations); },
                                    kAmxFlopsPerIteration * tile_iterations) /
                       1e9;
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
  peaks.caches = detect_cache_levels(peaks.threads, &peaks.cache_source);
  CacheLevel dram;  // a buffer per thread of 4x the largest level's share, at least 64 MiB
  dram.bytes_per_thread =
      2 * std::max<int64_t>(int64_t(64) << 20, 4 * (peaks.caches.empty() ? 0 : peaks.caches.back().bytes_per_thread));
  peaks.dram_stream_gbytes = measure_level_bandwidth(dram, isa, quick);
  for (auto& level : peaks.caches) {
    level.gbytes = measure_level_bandwidth(level, isa, quick);
    if (level.larger_claim_bytes > level.size_bytes) {
      // The larger claim holds only if a buffer sized by it still streams like this level: at
      // least half the rate of the buffer sized by the smaller claim, measured the same way (a
      // buffer that spills to DRAM reads 5-20x slower here; the DRAM copy figure is no yardstick,
      // since a read-only stream from DRAM outruns a copy by about 2x).
      CacheLevel larger = level;
      larger.size_bytes = level.larger_claim_bytes;
      larger.bytes_per_thread = larger.size_bytes * level.bytes_per_thread / level.size_bytes;
      double larger_gbytes = measure_level_bandwidth(larger, isa, quick);
      if (larger_gbytes > 0.5 * level.gbytes) {
        level.size_bytes = larger.size_bytes;
        level.bytes_per_thread = larger.bytes_per_thread;
        peaks.cache_source +=
            str_cat("; ", level.name, " of ", level.size_bytes >> 20, " MiB confirmed by measurement");
      } else {
        peaks.cache_source += str_cat("; ", level.name, " of ", level.larger_claim_bytes >> 20, " MiB not used (",
                                      static_cast<int>(larger_gbytes), " GB/s at that size)");
      }
    }
  }
  return peaks;
}

}  // namespace lathe
