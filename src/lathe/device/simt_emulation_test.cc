#include "lathe/device/simt_emulation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
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

// A warpgroup collective (4 warps) sees all 128 lanes of its group, in thread order, and reads
// and writes a lane's own array through a pointer (the wgmma emulation's accumulators).
TEST(SimtEmulation, GroupCollectiveSpansFourWarpsAndReachesTheLanesArrays) {
  std::vector<int> got(256);
  launch({1, 1, 1}, {256, 1, 1}, 0, [&](unsigned char*) {
    const int t = static_cast<int>(current().thread_idx.x);
    int registers[2] = {t, 0};
    struct Lane {
      int* registers;
    };
    struct Nothing {};
    group_collective<4, Lane, Nothing>({registers}, [](const Lane(&ins)[4 * kWarpSize], Nothing(&)[4 * kWarpSize]) {
      int sum = 0;
      for (const Lane& lane : ins) sum += lane.registers[0];
      for (int lane = 0; lane < 4 * kWarpSize; ++lane) ins[lane].registers[1] = sum + lane;
    });
    got[t] = registers[1];
  });
  for (int t = 0; t < 256; ++t) {
    const int first = t / 128 * 128, sum = 128 * first + 127 * 128 / 2;
    EXPECT_EQ(got[t], sum + t % 128) << t;
  }
}

// Two warpgroups take turns as the wgmma attention kernels' TensorCoreTurns do: warpgroup 1
// arrives at barrier 1 first; each then waits at its own barrier (1 + its index), works, and
// arrives at the other's. The work must alternate 0, 1, 0, 1, ... whatever order the fibers run.
TEST(SimtEmulation, NamedBarriersAlternateTwoWarpgroups) {
  std::vector<int> order;
  launch({1, 1, 1}, {256, 1, 1}, 0, [&](unsigned char*) {
    const int t = static_cast<int>(current().thread_idx.x), group = t / 128;
    if (group == 1) barrier_arrive(1, 256);
    for (int round = 0; round < 3; ++round) {
      barrier_sync(1 + group, 256);
      if (t % 128 == 0) order.push_back(group);
      barrier_arrive(2 - group, 256);
    }
    if (group == 0) barrier_sync(1, 256);
  });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 0, 1, 0, 1}));
}

TEST(SimtEmulation, UnbalancedOrMismatchedNamedBarriersAreErrors) {
  auto message = [](const std::function<void(unsigned char*)>& body) {
    try {
      launch({1, 1, 1}, {128, 1, 1}, 0, body);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_NE(message([](unsigned char*) {
              if (current().thread_idx.x < 32) barrier_arrive(3, 64);
            }).find("32 of 64 threads arrived at named barrier 3"),
            std::string::npos);
  EXPECT_NE(message([](unsigned char*) { barrier_sync(2, current().thread_idx.x < 32 ? 64 : 96); }).find("counts"),
            std::string::npos);
  EXPECT_NE(message([](unsigned char*) { barrier_arrive(2, 160); }).find("at most the block"), std::string::npos);
  EXPECT_NE(message([](unsigned char*) {
              if (current().thread_idx.x < 32) barrier_sync(4, 64);
            }).find("deadlock"),
            std::string::npos);
  EXPECT_NE(message([](unsigned char*) { barrier_sync(0, 128); }).find("ids 1-15"), std::string::npos);
}

TEST(SimtEmulation, SharedOffsetsAreFromTheBlocksSharedMemory) {
  launch({1, 1, 1}, {32, 1, 1}, 4096, [&](unsigned char* shared) {
    EXPECT_EQ(shared_offset(shared + 1040), 1040u);
    shared[100] = 7;
    EXPECT_EQ(*shared_at(100, 1), 7);
    EXPECT_THROW(shared_at(4090, 8), Error);
    unsigned char outside = 0;
    EXPECT_THROW(shared_offset(&outside), Error);
  });
}

// A stage of a two-stage pipeline refilled without the barrier after its readers, and read
// without the barrier after its writers: races, whichever order the fibers happen to run in.
TEST(SimtEmulation, SharedMemoryRacesBetweenBarriersAreErrors) {
  auto error_of = [](const std::function<void(unsigned char*, unsigned)>& body) {
    try {
      launch({1, 1, 1}, {64, 1, 1}, 1024, [&](unsigned char* shared) { body(shared, current().thread_idx.x); });
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  // Read after write: thread 40 reads what thread 3 wrote, then (fine) after a barrier.
  EXPECT_NE(error_of([](unsigned char* shared, unsigned t) {
              if (t == 3) note_shared_write(shared + 32, 16);
              if (t == 40) note_shared_read(shared + 32, 16);
            }).find("thread 40 read bytes 32 .. 48 that thread 3 accessed"),
            std::string::npos);
  EXPECT_EQ(error_of([](unsigned char* shared, unsigned t) {
              if (t == 3) note_shared_write(shared + 32, 16);
              sync_block();
              if (t == 40) note_shared_read(shared + 32, 16);
            }),
            "");
  // Write after read: thread 60 refills what threads 5 and 6 read (the fibers run in thread order).
  EXPECT_NE(error_of([](unsigned char* shared, unsigned t) {
              if (t == 5 || t == 6) note_shared_read(shared + 100, 4);
              if (t == 60) note_shared_write(shared + 96, 16);
            }).find("thread 60 wrote bytes 96 .. 112 that other threads accessed"),
            std::string::npos);
  // A thread may reread and rewrite its own bytes; wgmma (the async proxy) may not read even the
  // reader's own writes without a barrier.
  EXPECT_EQ(error_of([](unsigned char* shared, unsigned t) {
              note_shared_write(shared + 16 * t, 16);
              note_shared_read(shared + 16 * t, 16);
              note_shared_write(shared + 16 * t, 16);
            }),
            "");
  EXPECT_NE(error_of([](unsigned char* shared, unsigned t) {
              if (t == 0) note_shared_write(shared, 16);
              if (t == 0) note_shared_read(shared, 2, kAsyncProxy);
            }).find("wgmma read"),
            std::string::npos);
  // ... and only what its writer fenced into the async proxy before the barrier.
  EXPECT_NE(error_of([](unsigned char* shared, unsigned t) {
              if (t == 7) note_shared_write(shared + 64, 16);
              sync_block();
              if (t == 0) note_shared_read(shared + 64, 2, kAsyncProxy);
            }).find("thread 7 wrote without a fence.proxy.async"),
            std::string::npos);
  EXPECT_EQ(error_of([](unsigned char* shared, unsigned t) {
              if (t == 7) note_shared_write(shared + 64, 16);
              note_proxy_fence();
              sync_block();
              if (t == 0) note_shared_read(shared + 64, 2, kAsyncProxy);
            }),
            "");
}

// Shared memory is never zeros a kernel could count on: every block starts with NaN bytes (as
// floats and bf16), whatever the block before left; a store outside it is an error.
TEST(SimtEmulation, SharedMemoryStartsUnwrittenAndIsGuarded) {
  std::vector<int> nan_at_start(2);
  launch({2, 1, 1}, {32, 1, 1}, 64, [&](unsigned char* shared) {
    float value;
    std::memcpy(&value, shared + 4 * current().thread_idx.x % 64, sizeof(value));
    if (current().thread_idx.x == 0) nan_at_start[current().block_idx.x] = std::isnan(value);
    sync_block();
    std::memset(shared, 0, 64);  // (the next block must not see these zeros)
  });
  EXPECT_EQ(nan_at_start, (std::vector<int>{1, 1}));
  EXPECT_THROW(launch({1, 1, 1}, {32, 1, 1}, 64,
                      [](unsigned char* shared) {
                        if (current().thread_idx.x == 31) shared[64 + 3] = 1;
                      }),
               Error);
  EXPECT_THROW(launch({1, 1, 1}, {32, 1, 1}, 64,
                      [](unsigned char* shared) {
                        if (current().thread_idx.x == 0) shared[-1] = 1;
                      }),
               Error);
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

// A block of a partial warp runs (a GPU launches one-thread blocks), and its threads still meet at
// __syncthreads; a shuffle in it cannot complete on a GPU (its mask names absent lanes) and is an
// error here. Calls outside a launch are errors.
TEST(SimtEmulation, PartialWarpBlocksRunWithoutCollectivesAndCallsOutsideALaunchAreRefused) {
  std::vector<int> seen(48 * 2, 0);
  launch({2, 1, 1}, {48, 1, 1}, 0, [&](unsigned char*) {
    const auto& c = current();
    ++seen[c.block_idx.x * 48 + c.thread_idx.x];
    sync_block();
    ++seen[c.block_idx.x * 48 + c.thread_idx.x];
  });
  EXPECT_EQ(seen, std::vector<int>(48 * 2, 2));
  EXPECT_THROW(launch({1, 1, 1}, {48, 1, 1}, 0, [](unsigned char*) { shfl_xor(1.0f, 1); }), Error);
  EXPECT_THROW(launch({1, 1, 1}, {0, 1, 1}, 0, [](unsigned char*) {}), Error);
  EXPECT_THROW(sync_block(), Error);
}

}  // namespace
}  // namespace lathe::simt
