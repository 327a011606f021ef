// The vendor libraries lathe is compared with (oneDNN, OpenBLAS) run on their own thread pools and
// pick their own instruction sets; a fair peer row needs both to match lathe's.
//
// Threads: oneDNN runs through the OpenMP runtime, OpenBLAS through its own pool. Both default to
// every core, whatever `--threads` says, so a comparison at `--threads 1` would time one lathe
// thread against two vendor threads. The timing harnesses call match_vendor_threads() first: the
// suite's and the kernel lab's time_interleaved (suite_judge.h), and the op benchmark's peer rows
// (op_bench.cc).
//
// Instruction set: with `--isa avx2` (or LATHE_ISA) on an AVX-512 machine lathe runs its AVX2
// kernels, and a peer on AVX-512 would not be the AVX2 peer a user of an AVX2 CPU meets. oneDNN
// takes a cap at run time, before its first kernel is generated (cap_onednn_isa, called where the
// CLI reads --isa); OpenBLAS chooses its kernels when the library loads, from OPENBLAS_CORETYPE,
// which `lathe bench`, `lab` and `optimize` set (openblas_core_for_isa) and restart themselves
// with (cli/main.cc). vendor_isa_summary() says what each peer ran on, for the report.
#pragma once

#include <string>

#include "lathe/core/cpu_features.h"

namespace lathe {

// Sets the OpenMP runtime's and OpenBLAS's thread counts to lathe's num_threads(). Each setter is
// looked up in the loaded libraries (dlsym), so a build without oneDNN or OpenBLAS, or an
// OpenBLAS without the call, simply has nothing to set.
void match_vendor_threads();

// Caps oneDNN at the level matching `isa` (scalar: SSE4.1, oneDNN's floor; avx2; avx512:
// avx512_core; avx512_bf16: avx512_core_bf16, so no AMX). Returns "" when capped (or without
// oneDNN), else why not (oneDNN already generated a kernel).
std::string cap_onednn_isa(Isa isa);

// The OPENBLAS_CORETYPE whose kernels use no more than `isa`: "Prescott" (SSE3) for scalar,
// "Haswell" (AVX2 + FMA) for avx2; nullptr for avx512 and up (OpenBLAS's own choice for the CPU,
// e.g. "Cooperlake" on Zen 4).
const char* openblas_core_for_isa(Isa isa);

// For a peer in another process (the PyTorch run of `lathe bench train --vs torch`): the
// environment assignments, "NAME=value " each, that cap PyTorch's own kernels
// (ATEN_CPU_CAPABILITY), its oneDNN (ONEDNN_MAX_CPU_ISA), MKL (MKL_ENABLE_INSTRUCTIONS) and OpenBLAS
// (OPENBLAS_CORETYPE) at lathe's active level; "" when lathe runs the CPU's best level, AMX
// included (nothing to cap).
std::string peer_process_isa_environment();

// "oneDNN avx2, OpenBLAS Haswell": the instruction set oneDNN runs at (dnnl_get_effective_cpu_isa)
// and OpenBLAS's core type (openblas_get_corename); a peer not linked is left out; "no vendor
// library" when neither is.
std::string vendor_isa_summary();

}  // namespace lathe
