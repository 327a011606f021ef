// The code generator of `lathe optimize`: C++ source for one fusion problem (a GEMM with bias
// followed by a chain of elementwise and row steps, bench/suite/suite_fusion_definitions.h) under
// one KernelSchedule (schedule.h). The source is written against the kernel lab's C ABI
// (bench/lab/lathe_lab.h) and works for any shape (the lab checks hidden shapes): inputs x (m, k),
// w (n, k), bias (n), then each step's own inputs in chain order; output y (m, n), or (m, 1) when
// the chain reduces rows.
//   - the elementwise prefix of the chain (up to the first softmax / norm / row reduction) runs on
//     the accumulators before the store (packed form) or on each block while it is in cache (dot
//     form), or as a separate pass (epilogue = 0);
//   - the rest (the row phase) runs per row once full rows are done: on each block of rows while
//     hot (loop_order 1, threads over rows), else after the GEMM.
// Library mode (promotion, optimizer.h): the same kernel as a function of the library compiled
// per ISA (a *_kernels.cc file in namespace lathe::LATHE_ISA_NS) using lathe's thread pool.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lathe/bench/suite/suite_fusion_definitions.h"
#include "lathe/tune/optimize/schedule.h"

namespace lathe {

struct FusedGemmKernel {
  std::string problem;                          // the suite problem's name
  std::vector<suite_fusion::FusionStep> steps;  // the chain after x w^T + bias
  bool bias = true;                             // false: a plain matmul (inputs x, w only; no steps, no epilogue)
};

// The fusion problem's kernel description; throws lathe::Error (listing the names) when `problem`
// is not a fusion problem.
FusedGemmKernel fused_gemm_kernel(const std::string& problem);
// The suite's fusion problems the generator covers (all of them).
std::vector<std::string> fused_gemm_problems();

// Lab mode: defines extern "C" lathe_candidate. Library mode: defines
// lathe::LATHE_ISA_NS::found_<problem>(...) with the same arguments, for bench/suite/found/, under
// LibrarySchedules with `schedule` as its one searched tier.
std::string generate_fused_gemm_source(const FusedGemmKernel& kernel, const KernelSchedule& schedule,
                                       bool library_mode = false);

// The schedules of a library kernel, one per group of the copies it is compiled into: `wide` for
// the AVX-512 copy (32 vector registers, 16 floats), `narrow` for the AVX2 and portable copies (16
// registers, 8 or 4 floats). A search fills the tier of the machine it ran on; a missing tier is
// derived from the other (narrow: the wide schedule at 8 floats with the rows 16 registers hold;
// wide: the narrow schedule's tile at 16 floats). So a search on one kind of machine leaves the
// other kind's schedule in place.
struct LibrarySchedules {
  std::optional<KernelSchedule> wide, narrow;
  // The tier a schedule searched at its vector width belongs to: 16 floats wide, else narrow.
  void set_searched(const KernelSchedule& schedule);
  KernelSchedule wide_or_derived() const;    // at least one tier must be set
  KernelSchedule narrow_or_derived() const;  // likewise
};
// The searched tiers a library kernel's header names ("// avx512: KEY", "// avx2: KEY"; a
// "// avx2, derived: KEY" line names none; the one-schedule header of kernels emitted before the
// tiers counts by its vector width).
// Empty tiers where `library_text` is empty or names none; throws lathe::Error on a malformed key.
LibrarySchedules parse_library_schedules(const std::string& library_text);
// The library kernel of `kernel` under both tiers' schedules.
std::string generate_fused_gemm_library_source(const FusedGemmKernel& kernel, const LibrarySchedules& schedules);

// The fixed parts of every generated kernel, bench/suite/found/fused_gemm_prologue.inc and
// fused_gemm_body.inc, as text (baked in by cmake/lab.cmake).
const char* fused_gemm_prologue_text();
const char* fused_gemm_body_text();
// The part of the prologue every generated kernel shares (vector types, loads and stores, vector
// math): the row kernels (row_kernel_generator.h) carry it too.
std::string kernel_vector_math_text();
// run_threads(threads, fn) on a pool of std::threads, for lab candidates (inside their namespace).
const char* lab_threads_text();
// A C++ float literal of `value` ("2" -> "2.0f", 9 significant digits) for generated code.
std::string float_literal(double value);
// The standard headers a lab candidate includes (at file scope, before its namespace), which
// lab_threads_text() and the vector math need.
const char* lab_candidate_includes();

}  // namespace lathe
