// Which precision a run's matmuls actually use. train.dtype=bf16 runs the bf16 mixed-precision
// path (models/transformer.h, set_compute_dtype) where the CPU has AVX512_BF16 (and LATHE_ISA
// does not lower the level below it); elsewhere the run trains in f32, since the bf16 matmul
// would only convert while packing and be no faster.
//
// LATHE_FORCE_BF16=1 selects the bf16 path on any CPU. It is for tests (the numerics are the same
// everywhere; only speed differs), not for production runs.
#pragma once

#include <string>

#include "lathe/train/train_config.h"

namespace lathe {

// The dtype to train in for `requested`; when bf16 was requested but falls back to f32, `note`
// (if given) receives one line saying why, else it is cleared.
ComputeDtype resolve_compute_dtype(ComputeDtype requested, std::string* note = nullptr);

}  // namespace lathe
