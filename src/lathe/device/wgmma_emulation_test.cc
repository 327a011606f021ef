#include "lathe/device/wgmma_emulation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "lathe/core/error.h"
#include "lathe/core/half.h"
#include "lathe/device/simt_emulation.h"
#include "lathe/device/wgmma_layout.h"

namespace lathe::wgmma {
namespace {

constexpr int kLanes = 128;
constexpr int kN = 64;
// Shared memory: A (64 x 16 of a 64-row tile) at 0, B (kN x 16 of a kN-row tile) at 8 KB, both
// 64-column panels in wgmma's layout.
constexpr uint32_t kA = 0, kB = 8192;
constexpr size_t kSharedBytes = 16384;

// Small integers: every product and sum is exact in f32, so the expected values are exact.
float a_value(int m, int k) { return static_cast<float>((m * 3 + k * 5) % 7 - 3); }
float b_value(int n, int k) { return static_cast<float>((n * 5 + k * 3) % 9 - 4); }

void store_bf16(unsigned char* shared, uint32_t offset, float value) {
  const uint16_t bits = float_to_bf16(value).bits;
  std::memcpy(shared + offset, &bits, sizeof(bits));
}

void fill_tiles(unsigned char* shared) {
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 16; ++k) store_bf16(shared, kA + tile_offset(64, m, k), a_value(m, k));
  for (int n = 0; n < kN; ++n)
    for (int k = 0; k < 16; ++k) store_bf16(shared, kB + tile_offset(kN, n, k), b_value(n, k));
}

// Element (row, column) of a times b^T.
float product_value(int row, int column) {
  float sum = 0.0f;
  for (int k = 0; k < 16; ++k) sum += a_value(row, k) * b_value(column, k);
  return sum;
}

// The accumulator fragment's element i of lane t (device/wgmma.cuh): warp w holds rows 16 w +
// lane / 4 and + 8, columns 8 j + 2 (lane % 4), + 1 in d[j][0..1] and d[j][2..3].
int fragment_row(int t, int i) { return t / 32 * 16 + t % 32 / 4 + (i % 4) / 2 * 8; }
int fragment_column(int t, int i) { return i / 4 * 8 + 2 * (t % 4) + i % 2; }

void run_warpgroup(const std::function<void(unsigned char* shared, int lane)>& body) {
  simt::launch({1, 1, 1}, {kLanes, 1, 1}, kSharedBytes, [&](unsigned char* shared) {
    const int lane = static_cast<int>(simt::current().thread_idx.x);
    if (lane == 0) fill_tiles(shared);
    simt::sync_block();
    body(shared, lane);
  });
}

uint64_t a_descriptor() { return k_major_descriptor(kA, 64, 0, 0); }
uint64_t b_descriptor() { return k_major_descriptor(kB, kN, 0, 0); }

std::string error_of(const std::function<void(unsigned char*, int)>& body) {
  try {
    run_warpgroup(body);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(WgmmaEmulation, AProductLandsInEachLanesFragmentAtTheWait) {
  std::vector<float> got(kLanes * kN / 2);
  run_warpgroup([&](unsigned char*, int lane) {
    float d[kN / 8][4];
    emulation::issue(kN, false, &d[0][0], nullptr, a_descriptor(), b_descriptor(), false);
    emulation::commit();
    emulation::wait(0);
    std::memcpy(&got[lane * kN / 2], &d[0][0], sizeof(d));
  });
  for (int t = 0; t < kLanes; ++t)
    for (int i = 0; i < kN / 2; ++i)
      ASSERT_EQ(got[t * kN / 2 + i], product_value(fragment_row(t, i), fragment_column(t, i))) << t << " " << i;
}

// A from registers (the lanes' A fragments of the same matrix) and accumulation onto d, twice in
// one group: 2 a b^T + 1.
TEST(WgmmaEmulation, RegisterOperandsAndChainedAccumulation) {
  std::vector<float> got(kLanes * kN / 2);
  run_warpgroup([&](unsigned char*, int lane) {
    float d[kN / 8][4];
    for (auto& tile : d)
      for (float& value : tile) value = 1.0f;
    uint32_t a[4];
    const int row = lane / 32 * 16 + lane % 32 / 4, column = 2 * (lane % 4);
    for (int part = 0; part < 4; ++part) {
      const int r = row + part % 2 * 8, c = column + part / 2 * 8;
      a[part] = uint32_t{float_to_bf16(a_value(r, c)).bits} | uint32_t{float_to_bf16(a_value(r, c + 1)).bits} << 16;
    }
    emulation::issue(kN, false, &d[0][0], a, 0, b_descriptor(), true);
    emulation::issue(kN, false, &d[0][0], a, 0, b_descriptor(), true);
    emulation::commit();
    emulation::wait(0);
    std::memcpy(&got[lane * kN / 2], &d[0][0], sizeof(d));
  });
  for (int t = 0; t < kLanes; ++t)
    for (int i = 0; i < kN / 2; ++i)
      ASSERT_EQ(got[t * kN / 2 + i], 2 * product_value(fragment_row(t, i), fragment_column(t, i)) + 1) << t << " " << i;
}

// wait(1) completes the older of two groups only; until its wait an accumulator reads NaN.
TEST(WgmmaEmulation, AccumulatorsAreUnreadableUntilTheirGroupCompletes) {
  std::vector<int> first_done(kLanes), second_nan(kLanes), second_done(kLanes);
  run_warpgroup([&](unsigned char*, int lane) {
    float first[kN / 8][4], second[kN / 8][4];
    emulation::issue(kN, false, &first[0][0], nullptr, a_descriptor(), b_descriptor(), false);
    emulation::commit();
    emulation::issue(kN, false, &second[0][0], nullptr, a_descriptor(), b_descriptor(), false);
    emulation::commit();
    emulation::wait(1);
    first_done[lane] = first[0][0] == product_value(fragment_row(lane, 0), fragment_column(lane, 0));
    second_nan[lane] = std::isnan(second[0][0]);
    emulation::wait(0);
    second_done[lane] = second[0][0] == first[0][0];
  });
  for (int t = 0; t < kLanes; ++t) {
    EXPECT_TRUE(first_done[t]) << t;
    EXPECT_TRUE(second_nan[t]) << t;
    EXPECT_TRUE(second_done[t]) << t;
  }
}

TEST(WgmmaEmulation, HazardsOfTheAsynchronousProductAreErrors) {
  // A shared operand rewritten before the wait.
  EXPECT_NE(error_of([](unsigned char* shared, int) {
              float d[kN / 8][4];
              emulation::issue(kN, false, &d[0][0], nullptr, a_descriptor(), b_descriptor(), false);
              emulation::commit();
              store_bf16(shared, kB + tile_offset(kN, 5, 3), 100.0f);
              emulation::wait(0);
            }).find("changed before the wait"),
            std::string::npos);
  // An accumulator written before the wait.
  EXPECT_NE(error_of([](unsigned char*, int lane) {
              float d[kN / 8][4];
              emulation::issue(kN, false, &d[0][0], nullptr, a_descriptor(), b_descriptor(), false);
              emulation::commit();
              if (lane == 9) d[2][1] = 0.0f;
              emulation::wait(0);
            }).find("accumulator of a product in flight was written"),
            std::string::npos);
  // A register operand changed before the wait.
  EXPECT_NE(error_of([](unsigned char*, int lane) {
              float d[kN / 8][4];
              uint32_t a[4] = {0, 0, 0, 0};
              emulation::issue(kN, false, &d[0][0], a, 0, b_descriptor(), false);
              emulation::commit();
              if (lane == 70) a[3] = 1;
              emulation::wait(0);
            }).find("A register"),
            std::string::npos);
  // A product never waited for.
  EXPECT_NE(error_of([](unsigned char*, int) {
              float d[kN / 8][4];
              emulation::issue(kN, false, &d[0][0], nullptr, a_descriptor(), b_descriptor(), false);
              emulation::commit();
            }).find("never waited for"),
            std::string::npos);
  // Lanes issuing different shared operands.
  EXPECT_NE(error_of([](unsigned char*, int lane) {
              float d[kN / 8][4];
              emulation::issue(kN, false, &d[0][0], nullptr, a_descriptor(),
                               lane == 3 ? k_major_descriptor(kB, kN, 8, 0) : b_descriptor(), false);
            }).find("different instructions"),
            std::string::npos);
}

}  // namespace
}  // namespace lathe::wgmma
