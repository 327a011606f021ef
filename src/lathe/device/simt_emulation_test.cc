#include "lathe/device/simt_emulation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "lathe/core/error.h"

namespace lathe::simt {
namespace {

TEST(SimtEmulation, EveryThreadOfEveryBlockRunsWithItsCoordinates) {
  std::vector<int> seen(3 * 2 * 64, 0);
  launch({3, 2, 1}, {64, 1, 1}, 0, [&](unsigned char*) {
    const ThreadCoordinates& c = current();
    EXPECT_EQ(c.block_dim.x, 64u);
    EXPECT_EQ(c.grid_dim.x, 3u);
    EXPECT_EQ(c.grid_dim.y, 2u);
    ++seen[(c.block_idx.y * 3 + c.block_idx.x) * 64 + c.thread_idx.x];
  });
  for (int count : seen) EXPECT_EQ(count, 1);
}

// Each thread writes its slot, waits, then reads its neighbour's: without the barrier's wait the
// first threads would read slots not yet written (the fibers run one after another).
TEST(SimtEmulation, SyncBlockWaitsForEveryThread) {
  std::vector<int> read(128, -1);
  launch({2, 1, 1}, {64, 1, 1}, 64 * sizeof(int), [&](unsigned char* shared) {
    auto* slots = reinterpret_cast<int*>(shared);
    const unsigned t = current().thread_idx.x, b = current().block_idx.x;
    slots[t] = static_cast<int>(b * 1000 + t);
    sync_block();
    read[b * 64 + t] = slots[(t + 1) % 64];
  });
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 64; ++t) EXPECT_EQ(read[b * 64 + t], b * 1000 + (t + 1) % 64) << b << " " << t;
}

TEST(SimtEmulation, ShuffleXorExchangesWithinEachWarp) {
  std::vector<float> got(64);
  launch({1, 1, 1}, {64, 1, 1}, 0, [&](unsigned char*) {
    const unsigned t = current().thread_idx.x;
    got[t] = shfl_xor(static_cast<float>(t), t % 2 == 0 ? 1 : 3);  // per-lane masks, as the hardware allows
  });
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[t], static_cast<float>(t ^ (t % 2 == 0 ? 1 : 3))) << t;
}

TEST(SimtEmulation, CollectiveCombinesTheWarpsInputsOnce) {
  std::vector<int> got(96);
  static std::atomic<int> combines{0};
  combines = 0;
  launch({1, 1, 1}, {96, 1, 1}, 0, [&](unsigned char*) {
    const int t = static_cast<int>(current().thread_idx.x);
    got[t] = collective<int, int>(t, [](const int(&ins)[kWarpSize], int(&outs)[kWarpSize]) {
      ++combines;
      int sum = 0;
      for (int value : ins) sum += value;
      for (int lane = 0; lane < kWarpSize; ++lane) outs[lane] = sum + lane;
    });
  });
  EXPECT_EQ(combines.load(), 3);
  for (int t = 0; t < 96; ++t) {
    const int warp = t / 32, sum = 32 * (32 * warp) + 31 * 32 / 2;
    EXPECT_EQ(got[t], sum + t % 32) << t;
  }
}

TEST(SimtEmulation, ThreadsThatReturnedDoNotHoldABarrier) {
  int after = 0;
  launch({1, 1, 1}, {64, 1, 1}, 0, [&](unsigned char*) {
    if (current().thread_idx.x >= 32) return;
    sync_block();
    ++after;
  });
  EXPECT_EQ(after, 32);
}

TEST(SimtEmulation, ADivergentBarrierIsADeadlockNotAHang) {
  try {
    launch({1, 1, 1}, {32, 1, 1}, 0, [&](unsigned char*) {
      if (current().thread_idx.x < 16)
        shfl_xor(1.0f, 1);
      else
        sync_block();
    });
    FAIL() << "expected a deadlock error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("deadlock"), std::string::npos) << error.what();
  }
}

TEST(SimtEmulation, AThreadsExceptionEndsTheLaunch) {
  EXPECT_THROW(launch({2, 1, 1}, {32, 1, 1}, 0,
                      [&](unsigned char*) {
                        sync_block();
                        if (current().thread_idx.x == 7) throw std::runtime_error("kernel failure");
                      }),
               std::runtime_error);
  // The host thread can launch again afterwards.
  int ran = 0;
  launch({1, 1, 1}, {32, 1, 1}, 0, [&](unsigned char*) { ++ran; });
  EXPECT_EQ(ran, 32);
}

TEST(SimtEmulation, RefusesBlocksOfPartialWarpsAndCallsOutsideALaunch) {
  EXPECT_THROW(launch({1, 1, 1}, {48, 1, 1}, 0, [](unsigned char*) {}), Error);
  EXPECT_THROW(sync_block(), Error);
}

}  // namespace
}  // namespace lathe::simt
