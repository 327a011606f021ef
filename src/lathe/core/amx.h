// AMX (Advanced Matrix Extensions): whether this process may run tile instructions, decided once.
//
// Linux keeps the 8 KiB tile-data state off until a process asks for it: a tile instruction before
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) faults. amx_status() therefore
//   1. reads CPUID (AMX-TILE, AMX-BF16, AVX512_BF16) and XCR0 (XTILECFG and XTILEDATA enabled),
//   2. requests the tile-data permission,
//   3. runs a small tdpbf16ps product in a forked child (a CPU or hypervisor that reports AMX but
//      faults on it kills the child, not lathe) and checks its result,
// and decides with decide_amx(). Where AMX is present but unusable, one note line goes to stderr
// and dispatch stays on the vector path. Never throws.
//
// AMX is the level above avx512_bf16 (`--isa amx`, LATHE_ISA=amx; the CLI refuses it where AMX is
// not usable). It is not a core/cpu_features.h Isa value: the AMX implementations register with
// isa avx512_bf16 and are supported only while amx_active(), which any --isa below amx turns off.
#pragma once

#include <string>

namespace lathe {

// What the machine said, step by step (gathered by amx_status(); tests pass fakes).
struct AmxFacts {
  bool cpu_reports_amx = false;   // CPUID: AMX-TILE, AMX-BF16 and AVX512_BF16 (+ the AVX-512 base)
  bool os_enables_tiles = false;  // XCR0 bits 17 and 18
  bool permission_asked = false;
  int permission_errno = 0;  // 0: granted; else the errno of arch_prctl(ARCH_REQ_XCOMP_PERM)
  enum class Probe { not_run, correct, wrong_result, crashed, could_not_start } probe = Probe::not_run;
  int probe_signal = 0;  // the signal that ended the probe (crashed)
};

struct AmxStatus {
  bool present = false;  // the CPU reports AMX
  bool usable = false;   // tile instructions may run in this process
  std::string summary;   // for `lathe info`: "usable (...)", "not present", "present but not usable: ..."
  std::string note;      // one line for stderr when present but not usable; else empty
};

// Pure: the decision from the facts.
AmxStatus decide_amx(const AmxFacts& facts);

// This process's status: gathered and decided on the first call (which also prints the note).
const AmxStatus& amx_status();

// Whether kernels may use AMX now: usable, allowed, and the active ISA at avx512_bf16.
bool amx_active();
// --isa below amx (or LATHE_ISA) forbids AMX; allowing it again changes nothing where unusable.
void set_amx_allowed(bool allowed);

// iterations x 4 tdpbf16ps (each 16 x 16 x 32 x 2 = 16384 flops) on the calling thread, into a 2 x 2
// block of accumulator tiles without memory traffic: the loop `lathe info` times for the AMX peak.
// Returns a checksum. Only where amx_active() (asserted).
constexpr double kAmxFlopsPerIteration = 4.0 * 16 * 16 * 32 * 2;
float amx_tile_throughput_loop(long iterations);

}  // namespace lathe
