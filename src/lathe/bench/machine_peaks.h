// Measured machine peaks, the denominators of every roofline: f32 FMA throughput with the best
// active ISA, bf16 dot-product throughput (AVX512_BF16), memory (DRAM) bandwidth by a streaming
// copy, and the bandwidth of each data-cache level, each on all threads. Measured, never taken
// from a datasheet; only the cache sizes come from the OS (sysfs, else sysconf).
//
// Cache-aware roofline: a kernel whose working set (its minimum bytes moved, per thread) fits in a
// cache level runs warm out of that level, so its memory floor is bytes / that level's bandwidth,
// not DRAM's. memory_gbytes() picks the smallest level the working set fits in; cold timing
// (buffers rotated so every run starts from DRAM) uses the DRAM figure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/core/json.h"

namespace lathe {

// One data (or unified) cache level as the OS describes it, with its measured bandwidth.
struct CacheLevel {
  std::string name;                // "L1d", "L2", "L3"
  int64_t size_bytes = 0;          // one instance
  int shared_by = 1;               // logical CPUs sharing one instance
  int64_t bytes_per_thread = 0;    // capacity per lathe thread: size / min(shared_by, threads)
  double gbytes = 0;               // measured: best of a streaming update and a streaming read, GB/s
  int64_t larger_claim_bytes = 0;  // where sysfs and sysconf disagree: the larger size, kept only
                                   // if a buffer sized by it still streams at over 2x DRAM speed
};

// The data-cache levels of cpu0 (smallest first) and where they were read from ("sysfs",
// "sysconf", "sysfs (sysconf differs ...)" or "none"), the smaller size where the two disagree
// (measure_machine_peaks then tests the larger). bytes_per_thread uses `threads`.
std::vector<CacheLevel> detect_cache_levels(int threads, std::string* source);

struct MachinePeaks {
  double f32_gflops = 0;   // FMA throughput (2 flops per lane per FMA)
  double bf16_gflops = 0;  // vdpbf16ps throughput; 0 when the CPU lacks AVX512_BF16
  double amx_gflops = 0;   // AMX tdpbf16ps throughput; 0 when AMX is absent or not usable (core/amx.h)
  // vdpbf16ps rate over f32 FMA rate (flops), measured on one thread with the two loops alternated
  // and the best of each kept, so a burst of load on a shared machine cannot flip the ratio the way
  // it can flip two all-thread peaks measured one after the other; 0 without AVX512_BF16.
  double bf16_dot_speedup = 0;
  double copy_gbytes = 0;  // DRAM bandwidth: bytes read + bytes written per second
  // DRAM measured like the cache levels (vector update and read-only streams over a buffer far
  // beyond the last level, best of both): a read-only stream outruns a copy by about 2x, so a
  // read-heavy kernel measured against copy_gbytes alone could read above 100% of its roofline.
  double dram_stream_gbytes = 0;
  std::vector<CacheLevel> caches;  // smallest first; empty: DRAM only (not measured, or unknown)
  std::string cache_source;        // where the cache sizes came from
  int threads = 0;
  std::string isa;  // ISA used for the f32 measurement

  // Bandwidth (GB/s) for a working set of `bytes` in total over all threads: the smallest cache
  // level whose per-thread capacity holds bytes / threads, else DRAM; `cold` (every run starts
  // from DRAM) always gives DRAM. A level never reads slower than a larger one: a noisy small
  // level takes the larger level's figure. DRAM is the higher of copy_gbytes and
  // dram_stream_gbytes. `level` receives "L1d", "L2", "L3" or "DRAM".
  double memory_gbytes(double bytes, bool cold, std::string* level = nullptr) const;
  // The peak of the engine bf16 matmuls run on at the active ISA: AMX where it is active, else
  // vdpbf16ps, else (a forced bf16 run without either) f32 FMA.
  double bf16_matmul_gflops() const;
  // Roofline floor in seconds for the given work: max(flops / peak, bytes / memory_gbytes), the peak
  // being bf16_matmul_gflops() for bf16 compute.
  double floor_seconds(double flops, double bytes, bool bf16_compute = false, bool cold = false) const;
  Json to_json() const;
};

// The peak a run mixing two engines is measured against (MFU): of `flops`, `bf16_flops` run on the
// bf16 matmul engine (bf16_matmul_gflops: AMX or vdpbf16ps; 0 for an f32 run) and the rest on f32
// FMA; the blend is by time, flops / (bf16_flops / bf16 peak + rest / f32 peak), so neither engine
// is credited with the other's work.
double mixed_work_peak_gflops(const MachinePeaks& peaks, double flops, double bf16_flops);

// achieved / peak, capped at 1: a higher ratio means a peak measured low on a busy machine, never a
// result. `capped` (if given) tells whether the cap applied.
double capped_utilisation(double achieved_gflops, double peak_gflops, bool* capped = nullptr);

// Takes about a second. `quick` shortens the loops (for tests, `bench --quick` and the trainer's
// start, about 50 ms).
MachinePeaks measure_machine_peaks(bool quick = false);

// Holds the two all-thread vector peaks to their alternated ratio: f32_gflops and bf16_gflops are
// each raised to the other's figure over (or times) bf16_dot_speedup where that is higher. Each
// all-thread peak is the best of a few runs of milliseconds, and on a shared machine one thread
// descheduled through all of them halves it (seen: a training run's blended peak at 200 GFLOP/s,
// 401 a minute later, and its MFU capped at 100%); the ratio, the best of nine alternated rounds
// on one thread, is the steadier figure. Only raises (a low peak flatters every utilisation);
// no-op without AVX512_BF16 (speedup 0).
void hold_vector_peaks_to_their_ratio(MachinePeaks& peaks);

// Every figure the higher of the two measurements: on a shared machine a low measurement would
// flatter every row, so a report measured twice (start and end) uses the higher.
MachinePeaks higher_peaks(const MachinePeaks& a, const MachinePeaks& b);

}  // namespace lathe
