// Hopper's warpgroup matrix multiply (`wgmma.mma_async`, PTX ISA 8.0, sm_90a only) for lathe's
// kernels: the instructions a kernel issues, as inline functions, and the rules of their use.
// Include only from files named *_sm90a.cu (CMakeLists.txt compiles those for sm_90a alone; the
// arch-specific instructions exist nowhere else), or from host code that runs a kernel under
// device/simt_emulation.h: a host compiler gets the emulated forms of device/wgmma_emulation.h
// (asynchronous as on the GPU: a product lands at the wait that completes it). The shared-memory
// operands' layout and descriptors: device/wgmma_layout.h.
//
// A warpgroup is 4 consecutive warps (128 threads, the first warp a multiple of 4); all of them
// issue each instruction. The f32 accumulator of an m64nN product is held as float[N / 8][4] per
// thread, the register order of the instruction's d operands, which is mma.sync m16n8's C
// fragment per warp and per 8 columns: warp w of the group holds rows 16 w + group and + 8 (group
// = lane / 4), columns 8 j + 2 (lane % 4), + 1 in d[j][0..1] and d[j][2..3]. An A operand in
// registers is mma.sync m16n8k16's A fragment of the warp's 16 rows (uint32_t[4], bf16 pairs).
//
// The sequence: fence_operands() on the accumulators and A fragments the instructions will use,
// fence() (orders the registers' earlier writes before the tensor cores read them; needed before
// the first instruction and whenever an accumulator or A register was written in between), the
// instructions, commit(), wait<0>() (the accumulators are then final), then fence_operands() on
// each accumulator so the compiler reads them after the wait. Shared memory
// written by ordinary stores or cp.async must be fenced into the async proxy before an instruction
// reads it: `fence.proxy.async.shared::cta` by each writing thread, then a barrier (as
// pipeline_tiles<true> in ops/flash_attention/flash_attention_cuda_mma.cuh does).
#pragma once

#include <cstdint>
#if !defined(__CUDACC__)
#include "lathe/device/cuda_host_emulation.h"
#include "lathe/device/wgmma_emulation.h"
#endif

#include "lathe/device/wgmma_layout.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "device/wgmma.cuh: wgmma exists on sm_90a only; include it from *_sm90a.cu files"
#endif

namespace lathe::wgmma {

#if defined(__CUDACC__)
__device__ inline void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most kPending committed groups of this warpgroup are still running.
template <int kPending>
__device__ inline void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Pins the compiler's view of an accumulator or of A fragments here: writes before it stay before
// it, reads after it stay after it (the instructions read and write these registers
// asynchronously, which the compiler does not know). Before fence(), and after wait().
template <int kTiles>
__device__ inline void fence_operands(float (&d)[kTiles][4]) {
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[j][e])::"memory");
}
template <int kTiles>
__device__ inline void fence_operands(uint32_t (&a)[kTiles][4]) {
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[j][e])::"memory");
}
#else
inline void fence() {}
inline void commit() { emulation::commit(); }
template <int kPending>
inline void wait() {
  emulation::wait(kPending);
}
template <class Operand, int kTiles>
inline void fence_operands(Operand (&)[kTiles][4]) {}
#endif

#if defined(__CUDACC__)
#define LATHE_WGMMA_ACC4(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])

// d (64 x 128, f32) = a b^T (+ d when accumulate): a (64 x 16) and b (128 x 16) K-major bf16 in
// shared memory (descriptors of device/wgmma_layout.h).
__device__ inline void multiply_ss_n128(float (&d)[16][4], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : LATHE_WGMMA_ACC4(0), LATHE_WGMMA_ACC4(1), LATHE_WGMMA_ACC4(2), LATHE_WGMMA_ACC4(3), LATHE_WGMMA_ACC4(4),
        LATHE_WGMMA_ACC4(5), LATHE_WGMMA_ACC4(6), LATHE_WGMMA_ACC4(7), LATHE_WGMMA_ACC4(8), LATHE_WGMMA_ACC4(9),
        LATHE_WGMMA_ACC4(10), LATHE_WGMMA_ACC4(11), LATHE_WGMMA_ACC4(12), LATHE_WGMMA_ACC4(13), LATHE_WGMMA_ACC4(14),
        LATHE_WGMMA_ACC4(15)
      : "l"(a), "l"(b), "r"(accumulate));
}

// d (64 x 64, f32) = a b^T (+ d when accumulate), as above with b 64 x 16.
__device__ inline void multiply_ss_n64(float (&d)[8][4], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : LATHE_WGMMA_ACC4(0), LATHE_WGMMA_ACC4(1), LATHE_WGMMA_ACC4(2), LATHE_WGMMA_ACC4(3), LATHE_WGMMA_ACC4(4),
        LATHE_WGMMA_ACC4(5), LATHE_WGMMA_ACC4(6), LATHE_WGMMA_ACC4(7)
      : "l"(a), "l"(b), "r"(accumulate));
}

// d (64 x N, f32) += a b: a (64 x 16 bf16) in registers, b (16 x N) MN-major bf16 in shared memory
// (imm-trans-b = 1).
__device__ inline void multiply_rs_n128(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : LATHE_WGMMA_ACC4(0), LATHE_WGMMA_ACC4(1), LATHE_WGMMA_ACC4(2), LATHE_WGMMA_ACC4(3), LATHE_WGMMA_ACC4(4),
        LATHE_WGMMA_ACC4(5), LATHE_WGMMA_ACC4(6), LATHE_WGMMA_ACC4(7), LATHE_WGMMA_ACC4(8), LATHE_WGMMA_ACC4(9),
        LATHE_WGMMA_ACC4(10), LATHE_WGMMA_ACC4(11), LATHE_WGMMA_ACC4(12), LATHE_WGMMA_ACC4(13), LATHE_WGMMA_ACC4(14),
        LATHE_WGMMA_ACC4(15)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}
__device__ inline void multiply_rs_n64(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : LATHE_WGMMA_ACC4(0), LATHE_WGMMA_ACC4(1), LATHE_WGMMA_ACC4(2), LATHE_WGMMA_ACC4(3), LATHE_WGMMA_ACC4(4),
        LATHE_WGMMA_ACC4(5), LATHE_WGMMA_ACC4(6), LATHE_WGMMA_ACC4(7)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}

#undef LATHE_WGMMA_ACC4

// The products above by N (64 or 128).
template <int N>
__device__ inline void multiply_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b, int accumulate) {
  static_assert(N == 64 || N == 128, "m64n64k16 or m64n128k16");
  if constexpr (N == 128)
    multiply_ss_n128(d, a, b, accumulate);
  else
    multiply_ss_n64(d, a, b, accumulate);
}
template <int N>
__device__ inline void multiply_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  static_assert(N == 64 || N == 128, "m64n64k16 or m64n128k16");
  if constexpr (N == 128)
    multiply_rs_n128(d, a, b, accumulate);
  else
    multiply_rs_n64(d, a, b, accumulate);
}

__device__ inline uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}
#else  // the host compiler: the emulation

template <int N>
inline void multiply_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b, int accumulate) {
  static_assert(N == 64 || N == 128, "m64n64k16 or m64n128k16");
  emulation::issue(N, false, &d[0][0], nullptr, a, b, accumulate != 0);
}
template <int N>
inline void multiply_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  static_assert(N == 64 || N == 128, "m64n64k16 or m64n128k16");
  emulation::issue(N, true, &d[0][0], a, 0, b, accumulate != 0);
}

inline uint32_t shared_address(const void* pointer) { return simt::shared_offset(pointer); }
#endif

// The first 1024-byte boundary at or after `raw` (dynamic shared memory): tiles start on one, so a
// kernel asks for kAtomBytes more than its tiles take.
__device__ inline unsigned char* align_to_atom(unsigned char* raw) {
  return raw + (kAtomBytes - shared_address(raw) % kAtomBytes) % kAtomBytes;
}

}  // namespace lathe::wgmma
