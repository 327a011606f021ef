// bench/machine_peaks.h: the peak MFU is measured against blends the engines by the time each part
// of the work takes at its engine's peak, and utilisation never reads above 100%.
#include "lathe/bench/machine_peaks.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

MachinePeaks peaks_of(double f32, double bf16) {
  MachinePeaks peaks;
  peaks.f32_gflops = f32;
  peaks.bf16_gflops = bf16;
  return peaks;
}

TEST(MachinePeaks, MixedWorkPeakBlendsTheEnginesByTime) {
  const MachinePeaks zen5 = peaks_of(400, 800);
  EXPECT_DOUBLE_EQ(mixed_work_peak_gflops(zen5, 1e9, 0), 400);    // all f32
  EXPECT_DOUBLE_EQ(mixed_work_peak_gflops(zen5, 1e9, 1e9), 800);  // all bf16
  // Half and half: 0.5 / 800 + 0.5 / 400 seconds per GFLOP -> 533.3 GFLOP/s.
  EXPECT_NEAR(mixed_work_peak_gflops(zen5, 1e9, 5e8), 1.0 / (0.5 / 800 + 0.5 / 400), 1e-9);
}

// A Xeon without AMX: vdpbf16ps at half the f32 rate. The old MFU divided by the bf16 peak alone,
// so a bf16 run whose attention ran on the faster f32 units read 130%. Against the blend, a run at
// both engines' peaks reads exactly 100%.
TEST(MachinePeaks, UtilisationOfARunAtBothEnginesPeaksIsOneHundredPercent) {
  const MachinePeaks xeon = peaks_of(466, 232);
  const double flops = 1e9, bf16_flops = 0.7e9;
  const double seconds_at_peaks = bf16_flops / 232e9 + (flops - bf16_flops) / 466e9;
  const double achieved = flops / seconds_at_peaks / 1e9;
  EXPECT_NEAR(capped_utilisation(achieved, mixed_work_peak_gflops(xeon, flops, bf16_flops)), 1.0, 1e-12);
  EXPECT_GT(achieved / xeon.bf16_gflops, 1.0);  // what the bf16-only denominator reported
}

TEST(MachinePeaks, UtilisationIsCappedAtOneAndSaysSo) {
  bool capped = false;
  EXPECT_DOUBLE_EQ(capped_utilisation(130, 100, &capped), 1.0);
  EXPECT_TRUE(capped);
  EXPECT_DOUBLE_EQ(capped_utilisation(41, 100, &capped), 0.41);
  EXPECT_FALSE(capped);
  EXPECT_DOUBLE_EQ(capped_utilisation(41, 0, &capped), 0.0);  // no peak measured
}

// A descheduled thread through every short run halves one all-thread peak; the alternated ratio
// (measured on one thread) restores it, and never lowers either figure.
TEST(MachinePeaks, VectorPeaksAreHeldToTheirAlternatedRatio) {
  MachinePeaks zen4 = peaks_of(233, 200);  // vdpbf16ps measured low: 0.86x the f32 rate
  zen4.bf16_dot_speedup = 2.0;
  hold_vector_peaks_to_their_ratio(zen4);
  EXPECT_DOUBLE_EQ(zen4.bf16_gflops, 466);
  EXPECT_DOUBLE_EQ(zen4.f32_gflops, 233);
  MachinePeaks xeon = peaks_of(120, 232);  // f32 measured low on a CPU where vdpbf16ps runs at 0.5x
  xeon.bf16_dot_speedup = 0.5;
  hold_vector_peaks_to_their_ratio(xeon);
  EXPECT_DOUBLE_EQ(xeon.f32_gflops, 464);
  EXPECT_DOUBLE_EQ(xeon.bf16_gflops, 232);
  MachinePeaks avx2 = peaks_of(200, 0);  // no AVX512_BF16: nothing to hold to
  hold_vector_peaks_to_their_ratio(avx2);
  EXPECT_DOUBLE_EQ(avx2.f32_gflops, 200);
  EXPECT_DOUBLE_EQ(avx2.bf16_gflops, 0);
}

// Without AMX active the bf16 matmul engine is vdpbf16ps, else f32 (a forced bf16 run).
TEST(MachinePeaks, Bf16MatmulEngineFallsBackToF32) {
  EXPECT_DOUBLE_EQ(peaks_of(400, 0).bf16_matmul_gflops(), 400);
  MachinePeaks with_amx = peaks_of(400, 800);
  with_amx.amx_gflops = 3000;  // measured on another machine: counts only where AMX is active here
  EXPECT_GE(with_amx.bf16_matmul_gflops(), 800);
}

}  // namespace
}  // namespace lathe
