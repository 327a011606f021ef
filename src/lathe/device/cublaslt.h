// cuBLASLt, loaded on first use (dlopen) instead of linked. The library is about 500 MB, and its
// initialisers ran at every process start when it was linked, GPU or not: 26k page faults and
// 0.1 s for each `lathe` command and each test process (87% of lathe_tests' start-up). Only the
// CUDA matmul calls into it, so only a GPU run that multiplies pays for it, once.
// Included only by sources compiled with the CUDA backend (it includes the cuBLASLt header, whose
// declarations give the entry points' exact types).
#pragma once

#include <cublasLt.h>

namespace lathe::cuda {

// The entry points lathe uses, named as in the C API.
struct CublasLt {
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtGetStatusName) cublasLtGetStatusName;
  decltype(&::cublasLtGetStatusString) cublasLtGetStatusString;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) cublasLtMatrixLayoutSetAttribute;
};

// The library's entry points, loaded on the first call (thread-safe): by its soname through the
// usual search path, else from the toolkit's library folder this build was configured with.
// Throws lathe::Error naming the library and the loader's message when it cannot be loaded or
// lacks an entry point (every later call throws the same).
const CublasLt& cublaslt();

// Where the library was loaded from (loading it if need be); "" when it could not be loaded.
const char* cublaslt_path();

}  // namespace lathe::cuda
