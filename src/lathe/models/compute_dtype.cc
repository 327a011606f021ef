#include "lathe/models/compute_dtype.h"

namespace lathe {

const char* to_string(ComputeDtype dtype) {
  switch (dtype) {
    case ComputeDtype::f32:
      return "f32";
    case ComputeDtype::bf16:
      return "bf16";
    case ComputeDtype::automatic:
      return "auto";
  }
  return "?";
}

}  // namespace lathe
