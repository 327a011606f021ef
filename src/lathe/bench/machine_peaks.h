// Measured machine peaks, the denominators of every roofline: f32 FMA throughput with the best
// active ISA, bf16 dot-product throughput (AVX512_BF16), and memory bandwidth by a streaming copy,
// each on all threads. Measured, never taken from a datasheet.
#pragma once

#include <string>

#include "lathe/core/json.h"

namespace lathe {

struct MachinePeaks {
  double f32_gflops = 0;        // FMA throughput (2 flops per lane per FMA)
  double bf16_gflops = 0;       // vdpbf16ps throughput; 0 when the CPU lacks AVX512_BF16
  double copy_gbytes = 0;       // memory bandwidth: bytes read + bytes written per second
  int threads = 0;
  std::string isa;              // ISA used for the f32 measurement

  // Roofline floor in seconds for the given work: max(flops / peak, bytes / bandwidth).
  double floor_seconds(double flops, double bytes, bool bf16_compute = false) const;
  Json to_json() const;
};

// Takes about a second. `quick` shortens the loops (for tests and `bench --quick`).
MachinePeaks measure_machine_peaks(bool quick = false);

}  // namespace lathe
