// f32 <-> bf16 over contiguous memory, vectorised for the active instruction set and split over
// the thread pool. bf16 training converts activations and gradients at every linear layer, so
// these run tens of times a step. Bit-exact with half.h: round to nearest even, a NaN stays a
// (quiet) NaN, denormals kept.
#pragma once

#include <cstdint>

#include "lathe/core/cpu_features.h"
#include "lathe/core/half.h"

namespace lathe {

void convert_f32_to_bf16(const float* source, bf16* dest, int64_t n);  // dest[i] = float_to_bf16(source[i])
void convert_bf16_to_f32(const bf16* source, float* dest, int64_t n);  // dest[i] = bf16_to_float(source[i])

// The same on one thread with one instruction set's kernel (scalar, avx2 or avx512; the caller
// checks that the CPU has it): what the tests compare across instruction sets.
void convert_f32_to_bf16_with(Isa isa, const float* source, bf16* dest, int64_t n);
void convert_bf16_to_f32_with(Isa isa, const bf16* source, float* dest, int64_t n);

// The per-ISA span kernels behind them (bf16_convert_kernels.cc; bf16 as its bit pattern, one
// thread), for kernels compiled per ISA that convert inside their own parallel chunks (the cast op).
#define LATHE_DECLARE_BF16_SPANS(ns)                                      \
  namespace ns {                                                          \
  void f32_to_bf16_span(const float* source, uint16_t* dest, int64_t n);  \
  void bf16_to_f32_span(const uint16_t* source, float* dest, int64_t n);  \
  }
LATHE_DECLARE_BF16_SPANS(scalar)
LATHE_DECLARE_BF16_SPANS(avx2)
LATHE_DECLARE_BF16_SPANS(avx512)
#undef LATHE_DECLARE_BF16_SPANS

}  // namespace lathe
