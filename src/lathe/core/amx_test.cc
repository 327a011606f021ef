// core/amx.h: the AMX decision on faked facts (present / refused / faulting / wrong product), the
// scalar emulation of the tile instructions (tdpbf16ps's pair sums, rounding, denormals), and the
// probe's logic run on the emulation. The real instructions run only on a CPU with AMX.
#include "lathe/core/amx.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <csignal>

#include "lathe/core/cpu_features.h"

// The emulation is header code of the kernel compilations (namespace lathe::scalar, baseline
// flags, as this test is compiled).
#define LATHE_KERNEL_ISA 0
#include "lathe/core/simd.h"
// (simd.h first: it names the namespace)
#include "lathe/core/amx_tiles.h"

namespace lathe {
namespace scalar {
bool amx_tile_probe();  // core/amx_probe_amx_kernels.cc on the emulation
}  // namespace scalar

namespace {

using scalar::amx_tiles::EmulatedTiles;

AmxFacts reporting_amx() {
  AmxFacts facts;
  facts.cpu_reports_amx = true;
  facts.os_enables_tiles = true;
  facts.permission_asked = true;
  facts.probe = AmxFacts::Probe::correct;
  return facts;
}

TEST(AmxDecision, UsableOnlyWhenEveryStepSucceeds) {
  AmxStatus status = decide_amx(reporting_amx());
  EXPECT_TRUE(status.present && status.usable) << status.summary;
  EXPECT_TRUE(status.note.empty());
}

TEST(AmxDecision, AbsentCpuSaysNotPresentWithoutANote) {
  AmxStatus status = decide_amx(AmxFacts{});
  EXPECT_FALSE(status.present || status.usable);
  EXPECT_EQ(status.summary, "not present");
  EXPECT_TRUE(status.note.empty());
}

// Each failure: not usable, one note line naming the cause, and the fallback said.
TEST(AmxDecision, EveryFailureFallsBackWithOneNoteLine) {
  struct Case {
    AmxFacts facts;
    const char* cause;
  };
  std::vector<Case> cases;
  AmxFacts facts = reporting_amx();
  facts.os_enables_tiles = false;
  cases.push_back({facts, "XCR0"});
  facts = reporting_amx();
  facts.permission_errno = EPERM;
  cases.push_back({facts, "refused the tile-data permission"});
  facts = reporting_amx();
  facts.probe = AmxFacts::Probe::crashed;
  facts.probe_signal = SIGILL;
  cases.push_back({facts, "faulted (signal"});
  facts = reporting_amx();
  facts.probe = AmxFacts::Probe::wrong_result;
  cases.push_back({facts, "wrong product"});
  facts = reporting_amx();
  facts.probe = AmxFacts::Probe::could_not_start;
  cases.push_back({facts, "could not run"});
  for (const Case& c : cases) {
    AmxStatus status = decide_amx(c.facts);
    EXPECT_TRUE(status.present);
    EXPECT_FALSE(status.usable) << c.cause;
    EXPECT_NE(status.note.find(c.cause), std::string::npos) << status.note;
    EXPECT_NE(status.note.find("using the vector path"), std::string::npos) << status.note;
    EXPECT_EQ(status.note.find('\n'), std::string::npos) << status.note;
  }
}

// This machine: whatever it has, the status is decided without throwing, and AMX is active only
// where usable.
TEST(AmxDecision, ThisMachineDecidesAndNeverActivatesUnusableTiles) {
  const AmxStatus& status = amx_status();
  EXPECT_FALSE(status.summary.empty());
  if (!status.usable) {
    EXPECT_FALSE(amx_active());
  }
  if (!cpu_features().amx_bf16) {
    EXPECT_EQ(status.summary, "not present");
  }
}

uint16_t bf16_bits(float value) {  // truncation: the test values are exact in bf16
  uint32_t word;
  std::memcpy(&word, &value, 4);
  return static_cast<uint16_t>(word >> 16);
}

// Runs one tdpbf16ps on the emulation: c (16 x 16) += a (16 x 32 bf16) . b (16 pair rows x 32 bf16).
void emulated_product(const uint16_t* a, const uint16_t* b, float* c) {
  EmulatedTiles::configure(16, 64);
  EmulatedTiles::load<0>(c, 64);
  EmulatedTiles::load<4>(a, 64);
  EmulatedTiles::load<6>(b, 64);
  EmulatedTiles::dpbf16ps<0, 4, 6>();
  EmulatedTiles::store<0>(c, 64);
  EmulatedTiles::release();
}

// C[m][n] += A[m][2k+h] * B[k][2n+h] summed over pairs k and halves h: checked on values whose
// products and sums are exact, against a double sum (a different order of the same terms).
TEST(AmxEmulation, TdpDotProductOfPairsMatchesTheDefinition) {
  std::vector<uint16_t> a(16 * 32), b(16 * 32);
  std::vector<float> c(16 * 16);
  for (int i = 0; i < 16 * 32; ++i) a[i] = bf16_bits(static_cast<float>((3 * i) % 13 - 6) * 0.25f);
  for (int i = 0; i < 16 * 32; ++i) b[i] = bf16_bits(static_cast<float>((7 * i) % 9 - 4) * 0.5f);
  for (int i = 0; i < 16 * 16; ++i) c[i] = static_cast<float>(i % 3);
  std::vector<float> initial = c;
  emulated_product(a.data(), b.data(), c.data());
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      double expected = initial[16 * m + n];
      for (int k = 0; k < 16; ++k)
        for (int h = 0; h < 2; ++h)
          expected += static_cast<double>((3 * (32 * m + 2 * k + h)) % 13 - 6) * 0.25 *
                      (static_cast<double>((7 * (32 * k + 2 * n + h)) % 9 - 4) * 0.5);
      EXPECT_EQ(c[16 * m + n], static_cast<float>(expected)) << m << "," << n;
    }
}

// The SDM's order: even and odd halves are summed separately, then added to C. Row 0 of A holds
// pairs (2^24, 1), (-1, 0); column 0 of B pairs (1, 1), (1, 0): even = 2^24 - 1, odd = 1, C = 2^24.
// A running sum in k order (2^24, + 1 rounds back to 2^24, - 1) would give 2^24 - 1.
TEST(AmxEmulation, EvenAndOddHalvesAccumulateSeparatelyThenAddToC) {
  std::vector<uint16_t> a(16 * 32, 0), b(16 * 32, 0);
  std::vector<float> c(16 * 16, 0.0f);
  a[0] = bf16_bits(16777216.0f), a[1] = bf16_bits(1.0f), a[2] = bf16_bits(-1.0f);
  b[0] = bf16_bits(1.0f), b[1] = bf16_bits(1.0f);  // pair row 0, column 0
  b[32] = bf16_bits(1.0f);                         // pair row 1, column 0, even half
  emulated_product(a.data(), b.data(), c.data());
  EXPECT_EQ(c[0], 16777216.0f);
  EXPECT_EQ(c[1], 0.0f);
}

// Denormal inputs are read as zero; denormal results are flushed to zero.
TEST(AmxEmulation, DenormalsAreFlushedToZero) {
  std::vector<uint16_t> a(16 * 32, 0), b(16 * 32, 0);
  std::vector<float> c(16 * 16, 0.0f);
  a[0] = 0x0001;                   // row 0: the smallest bf16 denormal, read as zero
  a[32 * 1] = bf16_bits(FLT_MIN);  // row 1
  b[0] = bf16_bits(2.0f);          // pair row 0, column 0, even half
  b[2] = bf16_bits(0.5f);          // pair row 0, column 1, even half: FLT_MIN * 0.5 is denormal
  c[2] = std::ldexp(1.0f, -140);   // a denormal in C is read as zero
  emulated_product(a.data(), b.data(), c.data());
  EXPECT_EQ(c[0], 0.0f);           // denormal a * 2
  EXPECT_EQ(c[16 * 1 + 1], 0.0f);  // FLT_MIN * 0.5 flushed
  EXPECT_EQ(c[16 * 1 + 0], 2.0f * FLT_MIN);
  EXPECT_EQ(c[2], 0.0f);
}

// The probe (the same source the real tiles run in a forked child) passes on the emulation, and
// the emulation leaves no state configured.
TEST(AmxEmulation, ProbeComputesTheExpectedProduct) {
  EXPECT_TRUE(scalar::amx_tile_probe());
  EXPECT_EQ(EmulatedTiles::state().rows, 0);
}

}  // namespace
}  // namespace lathe
