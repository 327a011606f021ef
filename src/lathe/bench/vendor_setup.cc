#include "lathe/bench/vendor_setup.h"

#include <dlfcn.h>

#ifdef LATHE_HAVE_ONEDNN
#include <dnnl.h>
#endif

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
