#include "lathe/core/cpu_features.h"

#include <cpuid.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "lathe/core/error.h"

namespace lathe {
namespace {

void cpuid(unsigned leaf, unsigned subleaf, unsigned regs[4]) { __cpuid_count(leaf, subleaf, regs[0], regs[1], regs[2], regs[3]); }

unsigned long long read_xcr0() {
  unsigned eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

// The L1 data cache's size and ways from the deterministic cache parameters: leaf 4 (Intel) or
// 0x8000001D (AMD, with topology extensions), one subleaf per cache; EAX[4:0] type (1: data),
// EAX[7:5] level, EBX[31:22] + 1 ways, EBX[21:12] + 1 partitions, EBX[11:0] + 1 line bytes, ECX + 1
// sets. Left at 0 where neither leaf is there (a hypervisor may hide them).
void detect_l1d(CpuFeatures& f, unsigned max_leaf, unsigned max_extended_leaf) {
  unsigned r[4];
  unsigned leaf = 0;
  if (f.vendor == "GenuineIntel" && max_leaf >= 4) leaf = 4;
  if (f.vendor == "AuthenticAMD" && max_extended_leaf >= 0x8000001Du) {
    cpuid(0x80000001u, 0, r);
    if (r[2] & (1u << 22)) leaf = 0x8000001Du;  // TopologyExtensions
  }
  if (leaf == 0) return;
  for (unsigned index = 0; index < 8; ++index) {
    cpuid(leaf, index, r);
    const unsigned type = r[0] & 0x1f, level = (r[0] >> 5) & 0x7;
    if (type == 0) return;
    if (type != 1 || level != 1) continue;
    const long long ways = ((r[1] >> 22) & 0x3ff) + 1, partitions = ((r[1] >> 12) & 0x3ff) + 1;
    const long long line = (r[1] & 0xfff) + 1, sets = static_cast<long long>(r[2]) + 1;
    f.l1d_ways = static_cast<int>(ways);
    f.l1d_kib = static_cast<int>(ways * partitions * line * sets / 1024);
    return;
  }
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned r[4];
  cpuid(0, 0, r);
  unsigned max_leaf = r[0];
  char vendor[13] = {};
  std::memcpy(vendor, &r[1], 4);
  std::memcpy(vendor + 4, &r[3], 4);
  std::memcpy(vendor + 8, &r[2], 4);
  f.vendor = vendor;
  cpuid(1, 0, r);
  f.sse42 = r[2] & (1u << 20);
  f.fma = r[2] & (1u << 12);
  f.f16c = r[2] & (1u << 29);
  bool osxsave = r[2] & (1u << 27);
  bool avx_hw = r[2] & (1u << 28);
  unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
  bool os_avx = (xcr0 & 0x6) == 0x6;
  bool os_avx512 = (xcr0 & 0xe6) == 0xe6;
  f.avx = avx_hw && os_avx;
  if (max_leaf >= 7) {
    cpuid(7, 0, r);
    f.avx2 = f.avx && (r[1] & (1u << 5));
    f.avx512f = os_avx512 && (r[1] & (1u << 16));
    f.avx512dq = os_avx512 && (r[1] & (1u << 17));
    f.avx512bw = os_avx512 && (r[1] & (1u << 30));
    f.avx512vl = os_avx512 && (r[1] & (1u << 31));
    f.amx_bf16 = r[3] & (1u << 22);
    cpuid(7, 1, r);
    f.avx512_bf16 = f.avx512f && (r[0] & (1u << 5));
  }
  f.fma = f.fma && f.avx;
  f.f16c = f.f16c && f.avx;
  cpuid(0x80000000u, 0, r);
  const unsigned max_extended_leaf = r[0];
  if (max_extended_leaf >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      cpuid(0x80000002u + leaf, 0, r);
      std::memcpy(brand + 16 * leaf, r, 16);
    }
    std::string model = brand;
    model.erase(0, model.find_first_not_of(' '));
    model.erase(model.find_last_not_of(' ') + 1);
    f.model = model;
  }
  detect_l1d(f, max_leaf, max_extended_leaf);
  f.logical_cores = std::max(1u, std::thread::hardware_concurrency());
  return f;
}

Isa compute_detected(const CpuFeatures& f) {
  bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx2 && f.fma && f.f16c;
  if (avx512 && f.avx512_bf16) return Isa::avx512_bf16;
  if (avx512) return Isa::avx512;
  if (f.avx2 && f.fma && f.f16c) return Isa::avx2;
  return Isa::scalar;
}

Isa& isa_limit() {
  static Isa limit = [] {
    const char* env = std::getenv("LATHE_ISA");
    if (env && *env) {
      try {
        return parse_isa(env);
      } catch (const Error&) {
        // An unusable LATHE_ISA is ignored here; the CLI validates it with a clear message.
      }
    }
    return Isa::avx512_bf16;
  }();
  return limit;
}

}  // namespace

std::string CpuFeatures::flags_summary() const {
  std::string text;
  auto add = [&](bool present, const char* name) {
    if (!present) return;
    if (!text.empty()) text += ' ';
    text += name;
  };
  add(sse42, "sse4.2"), add(avx, "avx"), add(avx2, "avx2"), add(fma, "fma"), add(f16c, "f16c");
  add(avx512f, "avx512f"), add(avx512bw, "avx512bw"), add(avx512vl, "avx512vl"), add(avx512dq, "avx512dq");
  add(avx512_bf16, "avx512_bf16"), add(amx_bf16, "amx_bf16");
  return text;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

Isa detected_isa() {
  static const Isa isa = compute_detected(cpu_features());
  return isa;
}

Isa active_isa() { return std::min(detected_isa(), isa_limit()); }

void set_isa_limit(Isa limit) { isa_limit() = limit; }

bool isa_available(Isa isa) { return isa <= active_isa(); }

bool bf16_dot_outruns_fma() { return isa_available(Isa::avx512_bf16) && cpu_features().vendor == "AuthenticAMD"; }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
  }
  return "?";
}

Isa parse_isa(const std::string& name) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16})
    if (name == isa_name(isa)) return isa;
  throw_error("unknown instruction set '", name, "' (expected scalar, avx2, avx512 or avx512_bf16)");
}

}  // namespace lathe
