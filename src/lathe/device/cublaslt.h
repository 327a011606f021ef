// cuBLASLt, loaded on first use (dlopen) instead of linked. The library is about 500 MB, and its
// initialisers ran at every process start when it was linked, GPU or not: 26k page faults and
// 0.1 s for each `lathe` command and each test process (87% of lathe_tests' start-up). Only the
// CUDA matmul calls into it, so only a GPU run that multiplies pays for it, once.
// Included only by sources compiled with the CUDA backend (it includes the cuBLASLt header, whose
// declarations give the entry points' exact types).
#pragma once

#include <cublasLt.h>

namespace lathe::cuda {

// The entry points lathe uses, as an X-macro: the struct's fields, the loader's lookups and the
// test's checks all expand this one list.
// clang-format off
#define LATHE_CUBLASLT_ENTRY_POINTS(X)    \
  X(cublasLtCreate)                       \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetStatusString)              \
  X(cublasLtMatmul)                       \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatrixLayoutSetAttribute)
// clang-format on

// The entry points, named as in the C API, typed by its declarations.
struct CublasLt {
#define LATHE_CUBLASLT_FIELD(name) decltype(&::name) name;
  LATHE_CUBLASLT_ENTRY_POINTS(LATHE_CUBLASLT_FIELD)
#undef LATHE_CUBLASLT_FIELD
};

// The library's entry points, loaded on the first call (thread-safe): by its soname through the
// usual search path, else from the toolkit's library folder this build was configured with.
// Throws lathe::Error naming the library and the loader's message when it cannot be loaded or
// lacks an entry point (every later call throws the same).
const CublasLt& cublaslt();

// Where the library was loaded from (loading it if need be); "" when it could not be loaded.
const char* cublaslt_path();

}  // namespace lathe::cuda
