// bench/op_bench.h: a row's roofline takes its FLOPs at the peak of the engine they ran on
// (apply_roofline): bf16 inputs widened to f32 at the FMA peak, not at a bf16 engine's.
#include "lathe/bench/op_bench.h"

#include <gtest/gtest.h>

#include "lathe/bench/machine_peaks.h"
#include "lathe/core/amx.h"
#include "lathe/core/cpu_features.h"

namespace lathe {
namespace {

// 300 GFLOP in 3 s, no bytes; the engines: f32 FMA 100 GFLOP/s, vdpbf16ps 200, AMX 1000.
BenchRow row_on(const std::string& dispatch, const std::string& dtype) {
  BenchRow row;
  row.shape = "batch=1,seq=64,heads=1,head_dim=64,dtype=" + dtype;
  row.dispatch = dispatch;
  row.cost.flops = 300e9;
  row.cost.bytes = 0;
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

TEST(OpBench, RooflineTakesTheFlopsAtTheirEnginesPeak) {
  // Widened to f32: 300 / 100 = 3 s, the whole time.
  EXPECT_NEAR(roofline_percent(row_on("avx512 (heuristic) block_q=64", "bf16")), 100.0, 1e-9);
  // vdpbf16ps: 300 / 200 = 1.5 s of 3.
  EXPECT_NEAR(roofline_percent(row_on("avx512_bf16 (heuristic) block_q=64", "bf16")), 50.0, 1e-9);
  // AMX tiles: 300 / 1000 = 0.3 s of 3.
  EXPECT_NEAR(roofline_percent(row_on("amx (heuristic) block_q=64", "bf16")), 10.0, 1e-9);
  // f32 inputs run on the FMAs whatever the implementation's name.
  EXPECT_NEAR(roofline_percent(row_on("avx512_bf16 (pinned) block_q=64", "f32")), 100.0, 1e-9);
}

// The fused LM head hands its bf16 products to matmul (cost.matmul_bf16_flops): they count at the
// peak of the engine matmul's dispatch takes, whatever the op's own implementation is called.
TEST(OpBench, ProductsHandedToMatmulCountAtTheEngineMatmulTakes) {
  const Isa saved = active_isa();
  BenchRow row = row_on("avx512 (heuristic) token_chunk=512", "bf16");
  row.cost.matmul_bf16_flops = 200e9;  // 100 GFLOP left on the FMAs: 1 s
  set_isa_limit(Isa::avx2);            // no bf16 engine: all 300 on the FMAs, 3 s of 3
  EXPECT_NEAR(roofline_percent(row), 100.0, 1e-9);
  set_isa_limit(saved);
  if (active_isa() == Isa::avx512_bf16 && !amx_active()) {  // 200 on vdpbf16ps: 1 + 1 = 2 s of 3
    EXPECT_NEAR(roofline_percent(row), 200.0 / 3, 1e-9);
  }
  if (amx_active()) {  // 200 on tiles: 1 + 0.2 s
    EXPECT_NEAR(roofline_percent(row), 120.0 / 3, 1e-9);
  }
  row.shape = "batch=1,seq=64,heads=1,head_dim=64,dtype=f32";  // f32 inputs: nothing handed in bf16
  EXPECT_NEAR(roofline_percent(row), 100.0, 1e-9);
}

}  // namespace
}  // namespace lathe
