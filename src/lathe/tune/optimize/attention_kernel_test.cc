// The attention family of `lathe optimize` without the lab's worker processes: its schedule space
// (every move valid and one step away, narrower machines respected), the kernel description from
// the shape text, the generator (constants, a sample of the space compiles with the lab's
// compiler) and the cost model's ordering. The lab's correctness check of sampled schedules runs
// in the ctest `optimize` (tests/optimize/optimize_test.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "lathe/tune/optimize/attention_kernel_generator.h"
#include "lathe/tune/optimize/kernel_family.h"
#include "lathe/tune/optimize/optimize_test_support.h"

namespace lathe {
namespace {

const ScheduleLimits kLimits{16, 32};
const char* kShape = "batch=1,seq=1024,heads=8,kv_heads=2,head_dim=64,causal=1";

AttentionSchedule random_attention_schedule(std::mt19937_64& random, int walk, const ScheduleLimits& limits) {
  AttentionSchedule schedule = naive_attention_schedule();
  for (int step = 0; step < walk; ++step) {
    auto moves = attention_schedule_moves(schedule, limits);
    if (moves.empty()) break;
    schedule = moves[random() % moves.size()].schedule;
  }
  return schedule;
}

TEST(AttentionKernelSpace, EveryMoveIsValidNewAndOneStepAway) {
  std::mt19937_64 random(17);
  std::set<std::string> reached;
  for (int walk = 0; walk < 30; ++walk) {
    AttentionSchedule schedule = naive_attention_schedule();
    ASSERT_TRUE(attention_schedule_valid(schedule, kLimits));
    for (int step = 0; step < 10; ++step) {
      auto moves = attention_schedule_moves(schedule, kLimits);
      ASSERT_FALSE(moves.empty());
      for (const auto& move : moves) {
        EXPECT_TRUE(attention_schedule_valid(move.schedule, kLimits)) << move.name;
        auto a = config_to_params(move.schedule).entries, b = config_to_params(schedule).entries;
        int differing = 0;
        for (size_t i = 0; i < a.size(); ++i) differing += a[i].second != b[i].second;
        // One field, or two where the key block follows a wider vector or tile.
        EXPECT_GE(differing, 1) << move.name;
        const bool follows = move.name == "vector-width*2" || move.name == "tile-vectors*2";
        EXPECT_LE(differing, follows ? 2 : 1) << move.name;
        EXPECT_GE(move.schedule.block_k, move.schedule.tile_vectors * move.schedule.vector_width) << move.name;
      }
      schedule = moves[random() % moves.size()].schedule;
      reached.insert(config_to_params(schedule).to_string());
    }
  }
  EXPECT_GT(reached.size(), 60u);
  const ScheduleLimits avx2{8, 16};
  AttentionSchedule schedule = naive_attention_schedule();
  for (int step = 0; step < 40; ++step) {
    auto moves = attention_schedule_moves(schedule, avx2);
    schedule = moves[random() % moves.size()].schedule;
    EXPECT_LE(schedule.vector_width, 8);
    EXPECT_EQ(schedule.block_k % schedule.vector_width, 0);
  }
  AttentionSchedule bad = naive_attention_schedule();
  bad.block_k = 24;  // not a power of two
  EXPECT_FALSE(attention_schedule_valid(bad, kLimits));
  bad = naive_attention_schedule();
  bad.block_q = 16;
  EXPECT_FALSE(attention_schedule_valid(bad, kLimits));

  const auto space = make_kernel_space("gqa_attention", kShape, kLimits);
  EXPECT_EQ(space->hand_tuned_op(), "flash_attention");
  EXPECT_FALSE(space->promotable());
  EXPECT_THROW(space->source(space->naive(), true), Error);
  EXPECT_EQ(space->parse(space->naive().key()).key(), space->naive().key());
  EXPECT_THROW(space->parse("vector_width=16"), Error);
}

TEST(AttentionKernel, ReadsItsShapeAndRefusesWhatTheTemplateDoesNotCover) {
  const AttentionKernel kernel = attention_kernel("gqa_attention", kShape);
  EXPECT_EQ(kernel.seq, 1024);
  EXPECT_EQ(kernel.heads, 8);
  EXPECT_EQ(kernel.kv_heads, 2);
  EXPECT_EQ(kernel.head_dim, 64);
  EXPECT_TRUE(kernel.causal);
  EXPECT_EQ(kernel.scale, 0);
  EXPECT_EQ(attention_kernel("mha_causal_attention", "batch=1,seq=4,heads=2,head_dim=8").kv_heads, 2);
  EXPECT_THROW(attention_kernel("softcap_attention", kShape), Error);
  EXPECT_THROW(attention_kernel("gqa_attention", std::string(kShape) + ",window=16"), Error);
  EXPECT_THROW(attention_kernel("gqa_attention", std::string(kShape) + ",softcap=50"), Error);
  EXPECT_THROW(attention_kernel("gqa_attention", std::string(kShape) + ",dtype=bf16"), Error);
}

TEST(AttentionKernelGenerator, ConstantsComeFromTheShapeAndSampledSchedulesCompile) {
  const AttentionKernel causal =
      attention_kernel("mha_causal_attention", "batch=1,seq=19,heads=2,head_dim=16,causal=1");
  const AttentionKernel full =
      attention_kernel("gqa_attention", "batch=1,seq=19,heads=4,kv_heads=2,head_dim=16,scale=0.5");
  const std::string causal_text = generate_attention_kernel_source(causal, naive_attention_schedule());
  EXPECT_NE(causal_text.find("CAUSAL = true;"), std::string::npos);
  EXPECT_NE(causal_text.find("SCALE = 0.0f;"), std::string::npos);
  EXPECT_NE(causal_text.find("extern \"C\" int lathe_candidate"), std::string::npos);
  const std::string full_text = generate_attention_kernel_source(full, naive_attention_schedule());
  EXPECT_NE(full_text.find("CAUSAL = false"), std::string::npos);
  EXPECT_NE(full_text.find("SCALE = 0.5f;"), std::string::npos);
  // Compiling is the expensive part: the tiled form at this machine's full width, and one random
  // schedule of this machine's space (the lab compiles for the machine it runs on: a 16-wide
  // vector on an AVX2 machine is outside its space and compiles with an ABI warning).
  const ScheduleLimits machine = schedule_limits_for_this_machine();
  std::mt19937_64 random(19);
  AttentionSchedule tiled;
  tiled.vector_width = machine.max_vector_width, tiled.block_q = 4, tiled.block_k = 64, tiled.pack_k = 1;
  tiled.unroll = 2, tiled.tile_vectors = 2, tiled.thread_split = 1;
  ASSERT_TRUE(attention_schedule_valid(tiled, machine));
  for (const AttentionSchedule& schedule : {tiled, random_attention_schedule(random, 8, machine)}) {
    expect_lab_compiles(generate_attention_kernel_source(causal, schedule), config_to_params(schedule).to_string());
  }
}

TEST(AttentionKernelCostModel, RanksTiledWideSchedulesFirstAndStaysAboveTheFloor) {
  MachinePeaks peaks;
  peaks.f32_gflops = 400, peaks.copy_gbytes = 40, peaks.dram_stream_gbytes = 60, peaks.threads = 2;
  peaks.caches = {{"L1d", 32 << 10, 1, 32 << 10, 400, 0}, {"L2", 1 << 20, 1, 1 << 20, 200, 0}};
  const AttentionKernel kernel = attention_kernel("gqa_attention", kShape);
  const AttentionSchedule naive = naive_attention_schedule();
  AttentionSchedule wide = naive, tiled = naive;
  wide.vector_width = 16;
  tiled.vector_width = 16, tiled.block_q = 4, tiled.block_k = 64, tiled.pack_k = 1;
  const double t_naive = predict_attention_kernel_seconds(kernel, naive, peaks);
  const double t_wide = predict_attention_kernel_seconds(kernel, wide, peaks);
  const double t_tiled = predict_attention_kernel_seconds(kernel, tiled, peaks);
  // Causal: 8 heads x 1024 x 1025 / 2 pairs x 4 x 64 FLOPs at 400 GFLOP/s.
  EXPECT_GT(t_tiled, 8 * 1024 * 1025 / 2 * 4.0 * 64 / 400e9);
  EXPECT_LT(t_wide, t_naive);
  EXPECT_LT(t_tiled, t_wide);
  std::mt19937_64 random(23);
  for (int i = 0; i < 100; ++i) {
    const double t = predict_attention_kernel_seconds(kernel, random_attention_schedule(random, 8, kLimits), peaks);
    EXPECT_TRUE(std::isfinite(t) && t > 0);
  }
}

}  // namespace
}  // namespace lathe
