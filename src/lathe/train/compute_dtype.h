// Which precision a run's matmuls actually use (train.dtype: auto, bf16 or f32).
//
// auto (the default) picks by speed, not by flags: bf16 with f32 master weights (the mixed-precision
// path of models/transformer.h, set_compute_dtype) where bf16 training is faster on this CPU: AMX at
// the active ISA, or vdpbf16ps measured more than kBf16DotSpeedupForTraining times the f32 FMA rate
// (one thread, the two loops alternated: MachinePeaks::bf16_dot_speedup); f32 otherwise (an Intel
// Xeon without AMX measures vdpbf16ps at half its f32 rate). The linear layers' matmuls, forward
// and backward, run on vdpbf16ps (76% of the default config's FLOPs); the LM head, attention and
// the element-wise ops stay f32, and the bf16 path rounds each linear layer's input and output
// gradient (a vectorised pass). On AMD Zen 5 (vdpbf16ps 2.0x) the default config trained 1.44x
// faster in bf16 than in f32 (2 threads, docs/perf.md, "bf16 training on Zen 5").
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

// The vdpbf16ps / f32 FMA ratio above which bf16 training is taken to beat f32 without AMX. The
// measured 1.44x at a 2.0x dot product fits a step whose bf16-engine matmuls took 62% of the f32
// step and whose conversions cost next to nothing, which breaks even near 1.0x; 1.25x keeps a
// margin for models whose conversions weigh more (small d_model, long sequences).
inline constexpr double kBf16DotSpeedupForTraining = 1.25;

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

// The same for train.device=cuda: auto and bf16 take bf16 (tensor cores multiply bf16 at ~16x the
// GPU's f32 rate), f32 stays f32; `message` receives auto's line, or is cleared.
ComputeDtype resolve_gpu_compute_dtype(ComputeDtype requested, std::string* message = nullptr);

}  // namespace lathe
