/* The C ABI of a `lathe lab` candidate kernel (docs/kernel_lab.md). A candidate is one C or C++
 * source file that includes this header and defines lathe_candidate(); `lathe lab` compiles it into
 * a shared object with the machine's C++ compiler at lathe's flags, loads it in a separate, limited
 * process, and checks and times it against a suite problem.
 *
 *   int lathe_candidate(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs,
 *                       const LabDim* dims, int n_dims, int threads);
 *
 * inputs:  the problem's inputs in the order `lathe lab --problem P --describe` lists them,
 *          read-only (a write to one is a crash verdict), drawn afresh for every run.
 * outputs: the buffers to fill, NaN-poisoned before every call (an element left unwritten fails),
 *          with guard pages after (and before) each: a write out of bounds is a verdict. Every
 *          output starts 64-byte aligned.
 * dims:    the problem's shape as named integers ("m", "n", "k", "rows", ...), as in its shape text;
 *          the tensors' own shapes say the same, the dims are for convenience.
 * threads: how many threads the candidate may use (it starts and joins its own).
 * Return 0 on success; anything else is reported as a failure of the candidate.
 * The same process calls lathe_candidate many times (warm-up and timed runs): keep no results
 * across calls (outputs are poisoned between calls, and the last timed outputs are checked too).
 */
#ifndef LATHE_LAB_H
#define LATHE_LAB_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LATHE_LAB_MAX_RANK 8

typedef enum LabDType { LAB_F32 = 0, LAB_BF16 = 1, LAB_I32 = 2, LAB_I64 = 3, LAB_OTHER = 4 } LabDType;

typedef struct LabTensor {
  void* data;                         /* row-major, contiguous */
  LabDType dtype;
  int rank;
  int64_t shape[LATHE_LAB_MAX_RANK];  /* shape[0..rank) */
  const char* name;                   /* "x", "w", "bias", "y", ... */
} LabTensor;

typedef struct LabDim {
  const char* name;
  int64_t value;
} LabDim;

typedef int (*LabCandidateFn)(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs,
                              const LabDim* dims, int n_dims, int threads);

int lathe_candidate(const LabTensor* inputs, int n_inputs, LabTensor* outputs, int n_outputs, const LabDim* dims,
                    int n_dims, int threads);

#ifdef __cplusplus
}
#endif

#endif /* LATHE_LAB_H */
