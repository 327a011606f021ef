// Which precision a run's matmuls actually use (train.dtype: auto, bf16 or f32).
//
// auto (the default) picks by speed, not by flags: bf16 with f32 master weights (the mixed-precision
// path of models/transformer.h, set_compute_dtype) where bf16 training is faster on this CPU: AMX at
// the active ISA, or vdpbf16ps measured more than kBf16DotSpeedupForTraining times the f32 FMA rate
// (one thread, the two loops alternated: MachinePeaks::bf16_dot_speedup); f32 otherwise (an Intel
// Xeon without AMX measures vdpbf16ps at half its f32 rate). Only the forward's weight matmuls run
// on vdpbf16ps (the backward's widen bf16 to f32: kBf16EngineShareOfWeightFlops) and the bf16 path
// converts (weight copies after each step, activations), so a dot product twice as fast is not
// enough: on AMD Zen 5 (vdpbf16ps 2.0x) the default config trained at 0.93x f32's tokens/s in bf16
// (median of 5 alternated rounds, docs/perf.md, issue 16 section).
// The choice and its reason are one line, which the trainer and `lathe bench train` print once.
//
// bf16 runs the bf16 path where the CPU has AVX512_BF16 (and LATHE_ISA does not lower the level
// below it); elsewhere the run trains in f32 after one note line, since the bf16 matmul would only
// convert while packing and be no faster. LATHE_FORCE_BF16=1 makes an explicit bf16 take the bf16
// path on any CPU. It is for tests (the numerics are the same everywhere; only speed differs).
#pragma once

#include <string>

#include "lathe/train/train_config.h"

namespace lathe {

struct MachinePeaks;

// The vdpbf16ps / f32 FMA ratio above which bf16 training is taken to beat f32 without AMX: above
// the 2.0x at which it measured slower (see above).
inline constexpr double kBf16DotSpeedupForTraining = 2.5;

// Of a bf16 run's weight-matmul FLOPs (6 per weight and token), the forward's 2 run on the bf16
// matmul engine (vdpbf16ps or AMX); the backward's 4 (matmul_backward: dx and dW) widen the bf16
// operands to f32 while packing and run on f32 FMA. MFU blends the peaks by this share.
inline constexpr double kBf16EngineShareOfWeightFlops = 2.0 / 6.0;

// What the decision reads; resolve_compute_dtype gathers it from this machine, tests fake it.
struct DtypeEvidence {
  bool bf16_dot = false;        // AVX512_BF16 at the active ISA
  bool amx = false;             // AMX at the active ISA (core/amx.h)
  bool forced_bf16 = false;     // LATHE_FORCE_BF16=1
  double bf16_dot_speedup = 0;  // vdpbf16ps over f32 FMA (MachinePeaks::bf16_dot_speedup: one thread, alternated)
};

struct DtypeChoice {
  ComputeDtype dtype = ComputeDtype::f32;  // f32 or bf16, never automatic
  std::string message;  // auto: "dtype: auto -> bf16 (...)"; bf16 falling back to f32: a note; else empty
};

// Pure: the decision from the evidence.
DtypeChoice choose_compute_dtype(ComputeDtype requested, const DtypeEvidence& evidence);

// The dtype to train in for `requested` on this machine (peaks measured by the caller); `message`
// (if given) receives the line to print once, or is cleared.
ComputeDtype resolve_compute_dtype(ComputeDtype requested, const MachinePeaks& peaks, std::string* message = nullptr);

}  // namespace lathe
