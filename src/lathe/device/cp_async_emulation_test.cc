#include "lathe/device/cp_async_emulation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lathe/core/error.h"
#include "lathe/device/simt_emulation.h"

namespace lathe::cp_async_emulation {
namespace {

// Each thread copies 16 bytes of its own into its slot: the slot keeps its old bytes until the
// wait that completes the copy's group, and wait(1) completes all but the newest group.
TEST(CpAsyncEmulation, CopiesLandAtTheWaitThatCompletesTheirGroup) {
  std::vector<unsigned char> source(64 * 32);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<unsigned char>(i * 7 + 1);
  std::vector<int> before(64), first_landed(64), second_pending(64), all_landed(64);
  simt::launch({1, 1, 1}, {64, 1, 1}, 64 * 32, [&](unsigned char* shared) {
    const unsigned t = simt::current().thread_idx.x;
    unsigned char* first = shared + 32 * t;
    unsigned char* second = first + 16;
    copy_16(first, source.data() + 32 * t, 16);
    commit();
    copy_16(second, source.data() + 32 * t + 16, 0);  // zeros
    second[0] = 99;                                   // (the thread's own store, before the copy lands)
    commit();
    before[t] = first[0] == 0xff;  // what a block finds in shared memory it has not written
    wait(1);
    first_landed[t] = first[0] == source[32 * t] && first[15] == source[32 * t + 15];
    second_pending[t] = second[0] == 99;
    wait(0);
    all_landed[t] = second[0] == 0 && second[15] == 0;
  });
  for (int t = 0; t < 64; ++t) {
    EXPECT_TRUE(before[t]) << t;
    EXPECT_TRUE(first_landed[t]) << t;
    EXPECT_TRUE(second_pending[t]) << t;
    EXPECT_TRUE(all_landed[t]) << t;
  }
}

TEST(CpAsyncEmulation, CopiesNeverWaitedForAndRacesAreErrors) {
  std::vector<unsigned char> source(16, 1);
  auto error_of = [&](auto body) {
    try {
      simt::launch({1, 1, 1}, {32, 1, 1}, 256,
                   [&](unsigned char* shared) { body(shared, simt::current().thread_idx.x); });
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of([&](unsigned char* shared, unsigned t) {
              if (t == 4) copy_16(shared, source.data(), 16);
              commit();
            }).find("thread 4 ended its block with 1 copies never waited for"),
            std::string::npos);
  // Thread 9 refills bytes thread 2 read, with no barrier between.
  EXPECT_NE(error_of([&](unsigned char* shared, unsigned t) {
              if (t == 2) simt::note_shared_read(shared + 32, 16);
              if (t == 9) copy_16(shared + 32, source.data(), 16);
              commit();
              wait(0);
            }).find("thread 9 wrote bytes 32 .. 48 that thread 2 accessed"),
            std::string::npos);
  EXPECT_NE(error_of([&](unsigned char* shared, unsigned) { copy_16(shared, source.data(), 8); }).find("8 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace lathe::cp_async_emulation
