#include "lathe/bench/vendor_setup.h"

#include <dlfcn.h>

#ifdef LATHE_HAVE_ONEDNN
#include <dnnl.h>
#endif

#include "lathe/core/amx.h"
#include "lathe/core/error.h"
#include "lathe/core/parallel.h"

namespace lathe {

void match_vendor_threads() {
  using SetThreads = void (*)(int);
  const int threads = num_threads();
  for (const char* setter : {"omp_set_num_threads", "openblas_set_num_threads"})
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, setter))) set(threads);
}

#ifdef LATHE_HAVE_ONEDNN
namespace {

dnnl_cpu_isa_t onednn_isa_for(Isa isa) {
  switch (isa) {
    case Isa::scalar: return dnnl_cpu_isa_sse41;
    case Isa::avx2: return dnnl_cpu_isa_avx2;
    case Isa::avx512: return dnnl_cpu_isa_avx512_core;
    case Isa::avx512_bf16: return dnnl_cpu_isa_avx512_core_bf16;
  }
  return dnnl_cpu_isa_all;
}

const char* onednn_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace
#endif

std::string cap_onednn_isa(Isa isa) {
#ifdef LATHE_HAVE_ONEDNN
  const dnnl_status_t status = dnnl_set_max_cpu_isa(onednn_isa_for(isa));
  if (status != dnnl_success)
    return str_cat("oneDNN kept its own instruction set (", onednn_isa_name(dnnl_get_effective_cpu_isa()),
                   "): it had generated a kernel before the cap at ", isa_name(isa));
#else
  (void)isa;
#endif
  return "";
}

const char* openblas_core_for_isa(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "Prescott";
    case Isa::avx2: return "Haswell";
    default: return nullptr;
  }
}

std::string peer_process_isa_environment() {
  const Isa isa = active_isa();
  const bool amx_forbidden = amx_status().usable && !amx_active();  // e.g. --isa avx512_bf16 on an AMX CPU
  if (amx_active() || (isa >= detected_isa() && !amx_forbidden)) return "";
  struct Caps {
    const char *aten, *onednn, *mkl;
  };
  // Indexed by Isa: scalar, avx2, avx512, avx512_bf16.
  constexpr Caps kCaps[] = {{"default", "SSE41", "SSE4_2"},
                            {"avx2", "AVX2", "AVX2"},
                            {"avx512", "AVX512_CORE", "AVX512"},
                            {"avx512", "AVX512_CORE_BF16", "AVX512"}};
  const Caps& caps = kCaps[static_cast<int>(isa)];
  std::string environment = str_cat("ATEN_CPU_CAPABILITY=", caps.aten, " ONEDNN_MAX_CPU_ISA=", caps.onednn,
                                    " MKL_ENABLE_INSTRUCTIONS=", caps.mkl, " ");
  if (const char* core = openblas_core_for_isa(isa)) environment += str_cat("OPENBLAS_CORETYPE=", core, " ");
  return environment;
}

std::string vendor_isa_summary() {
  std::string summary;
#ifdef LATHE_HAVE_ONEDNN
  summary = str_cat("oneDNN ", onednn_isa_name(dnnl_get_effective_cpu_isa()));
#endif
  using CoreName = char* (*)();
  if (auto core_name = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename")))
    summary += str_cat(summary.empty() ? "" : ", ", "OpenBLAS ", core_name());
  return summary.empty() ? "no vendor library" : summary;
}

}  // namespace lathe
