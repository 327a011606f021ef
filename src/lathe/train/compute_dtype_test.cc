// train/compute_dtype.h: train.dtype=auto picks by speed (faked evidence: an AMX Xeon, a Zen 5 with a
// 2x vdpbf16ps, one just at the threshold, a Xeon whose vdpbf16ps runs at half its f32 rate, AVX2),
// explicit dtypes are kept (bf16 falls back with a note where it cannot run), and the default is auto.
#include "lathe/train/compute_dtype.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

// The speedup as MachinePeaks measures it (vdpbf16ps over f32 FMA, in flops), from two rates.
DtypeEvidence evidence(bool bf16_dot, bool amx, double f32_gflops, double bf16_gflops) {
  DtypeEvidence e;
  e.bf16_dot = bf16_dot;
  e.amx = amx;
  e.bf16_dot_speedup = bf16_gflops / f32_gflops;
  return e;
}

TEST(ComputeDtype, AutoIsTheDefault) { EXPECT_EQ(TrainConfig{}.train.dtype, ComputeDtype::automatic); }

TEST(ComputeDtype, AutoPicksBf16OnAmxEvenWhereVdpbf16psIsSlow) {
  DtypeChoice choice = choose_compute_dtype(ComputeDtype::automatic, evidence(true, true, 466, 232));
  EXPECT_EQ(choice.dtype, ComputeDtype::bf16);
  EXPECT_NE(choice.message.find("AMX"), std::string::npos) << choice.message;
}

// Zen 5: vdpbf16ps at 1.9-2.0x the f32 rate, where bf16 training measured 1.44x faster: bf16,
// saying the ratio it measured.
TEST(ComputeDtype, AutoPicksBf16WhereVdpbf16psIsTwiceF32) {
  DtypeChoice choice = choose_compute_dtype(ComputeDtype::automatic, evidence(true, false, 416, 780));
  EXPECT_EQ(choice.dtype, ComputeDtype::bf16);
  EXPECT_NE(choice.message.find("vdpbf16ps measured 1.88x"), std::string::npos) << choice.message;  // 780 / 416
}

// Just at the threshold, a dot product no faster than it is not taken: f32.
TEST(ComputeDtype, AutoKeepsF32AtTheThreshold) {
  DtypeChoice choice =
      choose_compute_dtype(ComputeDtype::automatic, evidence(true, false, 400, 400 * kBf16DotSpeedupForTraining));
  EXPECT_EQ(choice.dtype, ComputeDtype::f32) << choice.message;
}

TEST(ComputeDtype, AutoKeepsF32WhereBf16IsNotFaster) {
  for (const DtypeEvidence& e :
       {evidence(true, false, 466, 232), evidence(true, false, 400, 400), evidence(false, false, 200, 0)}) {
    DtypeChoice choice = choose_compute_dtype(ComputeDtype::automatic, e);
    EXPECT_EQ(choice.dtype, ComputeDtype::f32) << choice.message;
    EXPECT_EQ(choice.message.rfind("dtype: auto -> f32 (", 0), 0u) << choice.message;
  }
}

TEST(ComputeDtype, ExplicitChoicesAreKept) {
  DtypeEvidence fast_bf16 = evidence(true, true, 100, 1000);
  EXPECT_EQ(choose_compute_dtype(ComputeDtype::f32, fast_bf16).dtype, ComputeDtype::f32);
  EXPECT_TRUE(choose_compute_dtype(ComputeDtype::f32, fast_bf16).message.empty());
  DtypeEvidence slow_bf16 = evidence(true, false, 466, 232);  // bf16 asked for: bf16, though slower
  EXPECT_EQ(choose_compute_dtype(ComputeDtype::bf16, slow_bf16).dtype, ComputeDtype::bf16);
}

TEST(ComputeDtype, ExplicitBf16WithoutBf16HardwareFallsBackWithANote) {
  DtypeChoice choice = choose_compute_dtype(ComputeDtype::bf16, evidence(false, false, 200, 0));
  EXPECT_EQ(choice.dtype, ComputeDtype::f32);
  EXPECT_NE(choice.message.find("note:"), std::string::npos);
  DtypeEvidence forced = evidence(false, false, 200, 0);
  forced.forced_bf16 = true;
  EXPECT_EQ(choose_compute_dtype(ComputeDtype::bf16, forced).dtype, ComputeDtype::bf16);
}

// On a GPU the tensor cores decide: auto and bf16 take bf16 (auto says so once), f32 stays f32.
TEST(ComputeDtype, OnAGpuAutoTakesBf16AndF32IsKept) {
  std::string message = "stale";
  EXPECT_EQ(resolve_gpu_compute_dtype(ComputeDtype::automatic, &message), ComputeDtype::bf16);
  EXPECT_NE(message.find("dtype: auto -> bf16 (train.device=cuda"), std::string::npos) << message;
  EXPECT_EQ(resolve_gpu_compute_dtype(ComputeDtype::bf16, &message), ComputeDtype::bf16);
  EXPECT_EQ(message, "");
  EXPECT_EQ(resolve_gpu_compute_dtype(ComputeDtype::f32, &message), ComputeDtype::f32);
  EXPECT_EQ(message, "");
}

}  // namespace
}  // namespace lathe
