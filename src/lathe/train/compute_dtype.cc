#include "lathe/train/compute_dtype.h"

#include <cstdlib>
#include <cstring>

#include "lathe/core/cpu_features.h"

namespace lathe {

static bool bf16_forced() {
  const char* value = std::getenv("LATHE_FORCE_BF16");
  return value && std::strcmp(value, "1") == 0;
}

ComputeDtype resolve_compute_dtype(ComputeDtype requested, std::string* note) {
  if (note) note->clear();
  if (requested != ComputeDtype::bf16) return requested;
  if (isa_available(Isa::avx512_bf16) || bf16_forced()) return ComputeDtype::bf16;
  if (note) *note = "note: train.dtype=bf16 but this CPU has no AVX512_BF16; training in f32";
  return ComputeDtype::f32;
}

}  // namespace lathe
