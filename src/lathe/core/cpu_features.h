// CPU feature detection and the instruction-set level kernels may use. The level can be lowered
// (never raised) by set_isa_limit or LATHE_ISA=scalar|avx2|avx512|avx512_bf16, so the AVX2 and
// portable paths of the one binary can be exercised on an AVX-512 machine.
#pragma once

#include <string>

namespace lathe {

// Ordered: each level includes the ones below it.
//   avx2:        AVX2 + FMA + F16C
//   avx512:      AVX-512 F/BW/VL/DQ
//   avx512_bf16: avx512 + AVX512_BF16 (vdpbf16ps)
enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3 };

struct CpuFeatures {
  std::string vendor;
  std::string model;  // brand string, e.g. "AMD EPYC 9R45 ..."
  bool sse42 = false, avx = false, avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512_bf16 = false;
  bool amx_bf16 = false;
  int l1d_kib = 0, l1d_ways = 0;  // the L1 data cache per core (CPUID); 0: not reported
  int logical_cores = 1;
  std::string flags_summary() const;  // "avx2 fma f16c avx512f ..."
};

const CpuFeatures& cpu_features();
Isa detected_isa();          // best level this CPU supports
Isa active_isa();            // min(detected, limit): what dispatch uses
void set_isa_limit(Isa limit);
const char* isa_name(Isa isa);
Isa parse_isa(const std::string& name);  // throws lathe::Error for unknown names
bool isa_available(Isa isa);             // isa <= active_isa()
// Whether vdpbf16ps outruns the f32 FMA at the active ISA, so that a product of two bf16 operands
// is faster on bf16 depth pairs than widened to f32: avx512_bf16 active on an AMD CPU (Zen 4 and 5
// measure 2.0x the f32 FMA's FLOP rate, `lathe info`); Intel's AVX512_BF16 CPUs measure 0.5x
// (docs/perf.md), and kernels that may widen instead do so there. A rule by vendor, not a timing,
// so that dispatch (and with it the bits of a result) is the same on every run on one machine.
bool bf16_dot_outruns_fma();

}  // namespace lathe
