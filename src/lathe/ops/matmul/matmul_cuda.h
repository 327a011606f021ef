// The CUDA implementations of matmul and matmul_backward, registered by matmul.cc in builds with
// the CUDA backend (docs/cuda.md). The product runs in cuBLASLt (matmul_cuda.cc: f32 in true f32,
// bf16 inputs with f32 accumulation and f32 output), with the bias fused into its epilogue; the
// activations, the activation gradient, the bias gradient and an empty sum's bias are lathe's own
// kernels (matmul_cuda_kernels.cuh), so every activation has exactly the CPU definition. The
// backward is built from forward products. Those kernels and the steps that order them with the
// products also run on the host (matmul_cuda_emulated.cc, "cuda_emulated"), the products there in
// the CPU's matmul.
//
// The op's config type is shared with the CPU paths: the CUDA implementation reads only
// `microkernel`, as the index of the cuBLASLt algorithm among the heuristic's best four (0: its
// first choice), so `lathe tune matmul` picks among them like any other config.
//
// bf16 backward: the gradient g = dc * act' is f32, the other operand bf16; cuBLASLt multiplies
// like types only, and rounding g to one bf16 would cost it 16 bits against the op's tolerance
// rule. So g enters as three bf16 parts (matmul_cuda_split.cuh) in three accumulating tensor-core
// products: still ~5x the f32 GEMM's rate on Hopper, with f32 accuracy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lathe/ops/matmul/matmul.h"

namespace lathe {

Impl<MatmulArgs, MatmulCpuConfig> matmul_cuda_impl();
Impl<MatmulBackwardArgs, MatmulCpuConfig> matmul_backward_cuda_impl();
std::vector<Impl<MatmulArgs, MatmulCpuConfig>> matmul_cuda_emulated_impls();
std::vector<Impl<MatmulBackwardArgs, MatmulCpuConfig>> matmul_backward_cuda_emulated_impls();

// The heuristic's best choices the config space spans.
inline constexpr int kCublasLtAlgorithms = 4;
// c (+)= op(a) @ op(b) (+ bias) in cuBLASLt on lathe's stream, with the algorithm_index-th of its
// heuristic's best choices (the last found when fewer); the inner dimension > 0, the activation
// ignored (matmul_cuda_kernels.cuh applies it).
void cuda_lt_matmul(const MatmulArgs& args, int algorithm_index);

// Matrices as the kernels see them: `batch` blocks of (rows, cols) f32 with row stride `ld` and
// batch stride `batch_stride`.
struct DeviceMatrices {
  float* data;
  int64_t batch, rows, cols, ld, batch_stride;
};
// An f32 tensor as the sum of kBf16Parts bf16 tensors: parts[p * count + i], p = 0 the largest
// (bf16(x)), each next one bf16 of what is left. Three parts hold all 24 bits of an f32
// significand, so a product of the parts with an exact bf16 operand, summed in f32, has the
// accuracy of the f32 product: the bf16 backward's tensor-core GEMMs with the f32 gradient.
inline constexpr int kBf16Parts = 3;

namespace matmul_cuda {
// A matrix view's row stride as cuBLAS and the kernels take it (any positive value for one row).
inline int64_t row_stride_of(const TensorView& view) {
  return view.dim(-2) <= 1 ? std::max<int64_t>(1, view.dim(-1)) : view.stride(-2);
}
}  // namespace matmul_cuda

}  // namespace lathe
