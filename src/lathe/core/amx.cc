#include "lathe/core/amx.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "lathe/core/cpu_features.h"
#include "lathe/core/error.h"

namespace lathe {
namespace avx512 {  // core/amx_probe_amx_kernels.cc, the compilation with the tile instructions
bool amx_tile_probe();
float amx_tile_throughput_loop(long iterations);
}  // namespace avx512

namespace {

constexpr int kArchRequestXcompPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM (asm/prctl.h)
constexpr int kXfeatureXtiledata = 18;               // XFEATURE_XTILEDATA

// The probe in a child process: a fault kills the child only. The child runs no allocation and
// no lock (fork copies only this thread), then leaves with _exit.
AmxFacts::Probe run_probe_in_child(int* signal_number) {
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) return AmxFacts::Probe::could_not_start;
  if (child == 0) _exit(avx512::amx_tile_probe() ? 0 : 3);
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) return AmxFacts::Probe::could_not_start;
  if (WIFSIGNALED(status)) {
    *signal_number = WTERMSIG(status);
    return AmxFacts::Probe::crashed;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? AmxFacts::Probe::correct : AmxFacts::Probe::wrong_result;
}

// CPUID leaf 7 EDX: AMX-BF16 (bit 22), AMX-TILE (bit 24); XCR0 bits 17-18: tile state enabled.
bool cpu_reports_amx_tiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (edx & (1u << 22)) && (edx & (1u << 24));
}

bool os_enables_tile_state() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE
  unsigned low, high;
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return (low & 0x60000u) == 0x60000u;
}

bool& amx_allowed() {  // LATHE_ISA below amx forbids it from the start (the CLI also sets it)
  static bool allowed = [] {
    const char* env = std::getenv("LATHE_ISA");
    return env == nullptr || *env == '\0' || std::strcmp(env, "amx") == 0;
  }();
  return allowed;
}

AmxFacts gather_facts() {
  AmxFacts facts;
  // AVX512_BF16 is the level below (its vector code runs around the tiles: packing, epilogues).
  facts.cpu_reports_amx = cpu_reports_amx_tiles() && detected_isa() >= Isa::avx512_bf16;
  facts.os_enables_tiles = os_enables_tile_state();
  if (!facts.cpu_reports_amx || !facts.os_enables_tiles) return facts;
  facts.permission_asked = true;
  if (syscall(SYS_arch_prctl, kArchRequestXcompPermission, kXfeatureXtiledata) != 0) {
    facts.permission_errno = errno != 0 ? errno : EPERM;
    return facts;
  }
  facts.probe = run_probe_in_child(&facts.probe_signal);
  return facts;
}

}  // namespace

AmxStatus decide_amx(const AmxFacts& facts) {
  AmxStatus status;
  status.present = facts.cpu_reports_amx;
  if (!facts.cpu_reports_amx) {
    status.summary = "not present";
    return status;
  }
  std::string reason;
  if (!facts.os_enables_tiles)
    reason = "the operating system does not enable the tile state (XCR0)";
  else if (!facts.permission_asked)
    reason = "the tile-data permission was not requested";
  else if (facts.permission_errno != 0)
    reason = str_cat("the kernel refused the tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM: ",
                     std::strerror(facts.permission_errno), ")");
  else if (facts.probe == AmxFacts::Probe::crashed)
    reason =
        str_cat("a tdpbf16ps probe faulted (signal ", facts.probe_signal, ", ", strsignal(facts.probe_signal), ")");
  else if (facts.probe == AmxFacts::Probe::wrong_result)
    reason = "a tdpbf16ps probe computed a wrong product";
  else if (facts.probe != AmxFacts::Probe::correct)
    reason = "the tdpbf16ps probe could not run";
  if (reason.empty()) {
    status.usable = true;
    status.summary = "usable (tile-data permission granted, tdpbf16ps probe correct)";
    return status;
  }
  status.summary = "present but not usable: " + reason;
  status.note = "note: AMX: " + reason + "; using the vector path";
  return status;
}

const AmxStatus& amx_status() {
  static const AmxStatus status = [] {
    AmxStatus decided = decide_amx(gather_facts());
    if (!decided.note.empty()) std::fprintf(stderr, "%s\n", decided.note.c_str());
    return decided;
  }();
  return status;
}

bool amx_active() { return amx_allowed() && isa_available(Isa::avx512_bf16) && amx_status().usable; }

void set_amx_allowed(bool allowed) { amx_allowed() = allowed; }

float amx_tile_throughput_loop(long iterations) {
  LATHE_ASSERT(amx_active());
  return avx512::amx_tile_throughput_loop(iterations);
}

}  // namespace lathe
