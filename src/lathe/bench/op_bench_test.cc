// bench/op_bench.h: a row's roofline takes each part of its FLOPs at the peak of the engine it ran
// on (apply_roofline), so an implementation that runs only some products on vdpbf16ps is not
// measured against the vdpbf16ps peak for all of them.
#include "lathe/bench/op_bench.h"

#include <gtest/gtest.h>

#include "lathe/bench/machine_peaks.h"

namespace lathe {
namespace {

// 300 GFLOP in 3 s, no bytes; the engines: f32 FMA 100 GFLOP/s, vdpbf16ps 200, AMX 1000.
BenchRow row_on(const std::string& dispatch, const std::string& dtype, double bf16_dot_flops) {
  BenchRow row;
  row.shape = "batch=1,seq=64,heads=1,head_dim=64,dtype=" + dtype;
  row.dispatch = dispatch;
  row.cost.flops = 300e9;
  row.cost.bytes = 0;
  row.cost.bf16_dot_flops = bf16_dot_flops;
  row.timing.median = 3.0;
  return row;
}

double roofline_percent(BenchRow row) {
  MachinePeaks peaks;
  peaks.f32_gflops = 100, peaks.bf16_gflops = 200, peaks.amx_gflops = 1000;
  apply_roofline(row, peaks);
  EXPECT_EQ(row.bound, "compute");
  return row.roofline_percent;
}

TEST(OpBench, RooflineTakesEachPartOfTheFlopsAtItsEnginesPeak) {
  // Widened to f32: 300 / 100 = 3 s, the whole time.
  EXPECT_NEAR(roofline_percent(row_on("avx512 (heuristic) block_q=64", "bf16", 100e9)), 100.0, 1e-9);
  // vdpbf16ps for all of it (matmul's -1): 300 / 200 = 1.5 s of 3.
  EXPECT_NEAR(roofline_percent(row_on("avx512_bf16 (heuristic) mc=64", "bf16", -1)), 50.0, 1e-9);
  // 100 GFLOP on vdpbf16ps, 200 on f32: 0.5 + 2 = 2.5 s of 3.
  EXPECT_NEAR(roofline_percent(row_on("avx512_bf16 (heuristic) block_q=64", "bf16", 100e9)), 250.0 / 3, 1e-9);
  // AMX tiles: 300 / 1000 = 0.3 s of 3.
  EXPECT_NEAR(roofline_percent(row_on("amx (heuristic) block_q=64", "bf16", 100e9)), 10.0, 1e-9);
  // f32 inputs run on the FMAs whatever the implementation's name.
  EXPECT_NEAR(roofline_percent(row_on("avx512_bf16 (pinned) block_q=64", "f32", 100e9)), 100.0, 1e-9);
}

}  // namespace
}  // namespace lathe
