// Throughput loops for `lathe info`: many independent accumulators so the FMA (or bf16 dot)
// pipes, not latency, limit the rate. Compiled per ISA; returns a checksum so the work is kept.
#include "lathe/core/simd.h"

namespace lathe::LATHE_ISA_NS {

constexpr int kAccumulators = 12;

// Performs iterations * kAccumulators vector FMAs; each is 2 * VecF::width flops.
float fma_throughput_loop(long iterations, int* vector_width) {
  using simd::VecF;
  *vector_width = VecF::width;
  VecF acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = VecF::broadcast(0.001f * static_cast<float>(i));
  const VecF a = VecF::broadcast(0.999999f), b = VecF::broadcast(1e-7f);
  for (long it = 0; it < iterations; ++it) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = simd::fma(acc[i], a, b);
#if LATHE_KERNEL_ISA == 0
    __asm__ volatile("" : : : "memory");  // keep the scalar loop from being folded away
#endif
  }
  VecF sum = VecF::zero();
  for (int i = 0; i < kAccumulators; ++i) sum = sum + acc[i];
  return sum.reduce_add();
}

// Performs iterations * kAccumulators vdpbf16ps (each 32 multiply-adds = 64 flops); AVX-512 only.
float bf16_dot_throughput_loop(long iterations) {
#if LATHE_KERNEL_ISA == 2
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(0.0f);
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3380);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 sum = _mm512_setzero_ps();
  for (int i = 0; i < kAccumulators; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
#else
  (void)iterations;
  return 0.0f;
#endif
}

}  // namespace lathe::LATHE_ISA_NS

namespace lathe::LATHE_ISA_NS {

// Streams over data[0, count) `repeats` times, reading and writing every element (one load and one
// store per element, as in-place updates and row kernels do); count is a multiple of 4 vectors.
float stream_update_loop(float* data, long count, long repeats) {
  using simd::VecF;
  const VecF a = VecF::broadcast(0.999999f), b = VecF::broadcast(1e-7f);
  for (long repeat = 0; repeat < repeats; ++repeat) {
    for (long i = 0; i < count; i += 4 * VecF::width) {
      for (int k = 0; k < 4; ++k)
        simd::fma(VecF::load(data + i + k * VecF::width), a, b).store(data + i + k * VecF::width);
    }
    __asm__ volatile("" : : "r"(data) : "memory");
  }
  return data[0];
}

// Streams over data[0, count) `repeats` times, reading only (two loads per cycle where the core
// can): the highest rate a level delivers to a kernel that mostly reads.
float stream_read_loop(const float* data, long count, long repeats) {
  using simd::VecF;
  VecF acc[4] = {VecF::zero(), VecF::zero(), VecF::zero(), VecF::zero()};
  for (long repeat = 0; repeat < repeats; ++repeat) {
    for (long i = 0; i < count; i += 4 * VecF::width)
      for (int k = 0; k < 4; ++k) acc[k] = acc[k] + VecF::load(data + i + k * VecF::width);
    __asm__ volatile("" : : "r"(data) : "memory");
  }
  return (acc[0] + acc[1] + acc[2] + acc[3]).reduce_add();
}

}  // namespace lathe::LATHE_ISA_NS
