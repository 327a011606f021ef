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

std::string cap_onednn_isa(Isa isa, bool amx) {
#ifdef LATHE_HAVE_ONEDNN
  if (amx) return "";
  const dnnl_status_t status = dnnl_set_max_cpu_isa(onednn_isa_for(isa));
  if (status != dnnl_success)
    return str_cat("oneDNN kept its own instruction set (", onednn_isa_name(dnnl_get_effective_cpu_isa()),
                   "): it had generated a kernel before the cap at ", isa_name(isa));
#else
  (void)isa, (void)amx;
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
  std::string environment;
  switch (isa) {
    case Isa::scalar:
      environment = "ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 MKL_ENABLE_INSTRUCTIONS=SSE4_2 ";
      break;
    case Isa::avx2:
      environment = "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ";
      break;
    case Isa::avx512:
      environment = "ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE MKL_ENABLE_INSTRUCTIONS=AVX512 ";
      break;
    case Isa::avx512_bf16:
      environment = "ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 MKL_ENABLE_INSTRUCTIONS=AVX512 ";
      break;
  }
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
