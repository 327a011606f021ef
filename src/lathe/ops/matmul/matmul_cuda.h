// The CUDA implementations of matmul and matmul_backward, registered by matmul.cc in builds with
// the CUDA backend (docs/cuda.md). The product runs in cuBLASLt (f32 in true f32, bf16 inputs with
// f32 accumulation and f32 output), with the bias fused into its epilogue; the activations, the
// activation gradient and the bias gradient are lathe's own kernels (matmul_cuda.cu), so every
// activation has exactly the CPU definition. The backward is built from forward products.
//
// The op's config type is shared with the CPU paths: the CUDA implementation reads only
// `microkernel`, as the index of the cuBLASLt algorithm among the heuristic's best four (0: its
// first choice), so `lathe tune matmul` picks among them like any other config.
//
// bf16 backward: the gradient g = dc * act' is f32, the other operand bf16; cuBLASLt multiplies
// like types only, and rounding g to one bf16 would cost it 16 bits against the op's tolerance
// rule. So g enters as three bf16 parts (cuda_split_bf16x3) in three accumulating tensor-core
// products: still ~5x the f32 GEMM's rate on Hopper, with f32 accuracy.
#pragma once

#include <cstdint>

#include "lathe/ops/matmul/matmul.h"

namespace lathe {

Impl<MatmulArgs, MatmulCpuConfig> matmul_cuda_impl();
Impl<MatmulBackwardArgs, MatmulCpuConfig> matmul_backward_cuda_impl();

// Kernels of matmul_cuda.cu, on lathe's stream. Matrices are `batch` blocks of (rows, cols) f32
// with row stride `ld` and batch stride `batch_stride`.
struct DeviceMatrices {
  float* data;
  int64_t batch, rows, cols, ld, batch_stride;
};
// c = act(c) in place (relu, gelu_tanh, silu).
void cuda_apply_activation(const DeviceMatrices& c, Activation activation);
// g (contiguous, batch * rows * cols) = dc * act'(pre_activation); pre_activation unused for none.
void cuda_activation_gradient(const DeviceMatrices& dc, const DeviceMatrices& pre_activation, Activation activation,
                              float* g);
// dbias[j] = sum over all rows of g[., j]; g contiguous (rows, cols).
void cuda_column_sums(const float* g, int64_t rows, int64_t cols, float* dbias);
// c = bias (broadcast over rows), or c += bias when accumulate: the product of an empty sum.
void cuda_add_bias(const DeviceMatrices& c, const float* bias, bool accumulate);
// An f32 tensor as the sum of kBf16Parts bf16 tensors: parts[p * count + i], p = 0 the largest
// (bf16(x)), each next one bf16 of what is left. Three parts hold all 24 bits of an f32
// significand, so a product of the parts with an exact bf16 operand, summed in f32, has the
// accuracy of the f32 product: the bf16 backward's tensor-core GEMMs with the f32 gradient.
inline constexpr int kBf16Parts = 3;
void cuda_split_bf16x3(const float* x, int64_t count, void* parts);

}  // namespace lathe
