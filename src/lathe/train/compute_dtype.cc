#include "lathe/train/compute_dtype.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "lathe/bench/machine_peaks.h"
#include "lathe/core/amx.h"
#include "lathe/core/cpu_features.h"
#include "lathe/core/error.h"

namespace lathe {

static bool bf16_forced() {
  const char* value = std::getenv("LATHE_FORCE_BF16");
  return value && std::strcmp(value, "1") == 0;
}

DtypeChoice choose_compute_dtype(ComputeDtype requested, const DtypeEvidence& evidence) {
  DtypeChoice choice;
  if (requested == ComputeDtype::f32) return choice;
  if (requested == ComputeDtype::bf16) {
    if (evidence.bf16_dot || evidence.amx || evidence.forced_bf16) {
      choice.dtype = ComputeDtype::bf16;
      return choice;
    }
    choice.message = "note: train.dtype=bf16 but this CPU has no AVX512_BF16; training in f32";
    return choice;
  }
  if (evidence.amx) {
    choice.dtype = ComputeDtype::bf16;
    choice.message = "dtype: auto -> bf16 with f32 master weights (bf16 matmuls run on AMX tiles)";
    return choice;
  }
  if (!evidence.bf16_dot) {
    choice.message = "dtype: auto -> f32 (no AVX512_BF16 or AMX at the active ISA: bf16 would be no faster)";
    return choice;
  }
  const double speedup = std::round(evidence.bf16_dot_speedup * 100) / 100;  // two decimals
  if (evidence.bf16_dot_speedup > kBf16DotSpeedupForTraining) {
    choice.dtype = ComputeDtype::bf16;
    choice.message =
        str_cat("dtype: auto -> bf16 with f32 master weights (vdpbf16ps measured ", speedup, "x the f32 FMA rate)");
    return choice;
  }
  choice.message = str_cat("dtype: auto -> f32 (vdpbf16ps measured ", speedup, "x the f32 FMA rate; bf16 training ",
                           "needs more than ", kBf16DotSpeedupForTraining, "x without AMX to be faster)");
  return choice;
}

ComputeDtype resolve_compute_dtype(ComputeDtype requested, const MachinePeaks& peaks, std::string* message) {
  DtypeEvidence evidence;
  evidence.bf16_dot = isa_available(Isa::avx512_bf16);
  evidence.amx = amx_active();
  evidence.forced_bf16 = bf16_forced();
  evidence.bf16_dot_speedup = peaks.bf16_dot_speedup;
  DtypeChoice choice = choose_compute_dtype(requested, evidence);
  if (message) *message = choice.message;
  return choice.dtype;
}

ComputeDtype resolve_gpu_compute_dtype(ComputeDtype requested, std::string* message) {
  if (message)
    *message = requested == ComputeDtype::automatic
                   ? "dtype: auto -> bf16 (train.device=cuda: tensor cores multiply bf16 at ~16x the GPU's f32 rate)"
                   : "";
  return requested == ComputeDtype::f32 ? ComputeDtype::f32 : ComputeDtype::bf16;
}

}  // namespace lathe
