// gated_activation's CUDA kernels and the host steps that launch them, shared by the GPU
// (gated_activation_cuda.cu, cuda::DeviceLauncher) and the host emulation
// (gated_activation_cuda_emulated.cc, simt::HostLauncher); see device/cuda_launcher.cuh. A thread
// per element (grid-stride over rows x cols); gate, up and the gradients may be row-strided views.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/device/cuda_kernel_utils.cuh"
#include "lathe/ops/gated_activation/gated_activation.h"

namespace lathe::gated_activation_cuda {

constexpr int kThreads = 256;

// A (rows, cols) tensor whose rows are `stride` elements apart.
struct Rows {
  void* data;
  int64_t stride;
};

inline Rows rows_of(const TensorView& view) { return {view.data, view.dim(0) > 1 ? view.stride(0) : view.dim(1)}; }

__device__ inline void activation_and_derivative(GatedActivation activation, float g, float& act, float& derivative) {
  if (activation == GatedActivation::silu) {
    const float sigmoid = 1.0f / (1.0f + expf(-g));
    act = g * sigmoid;
    derivative = sigmoid * (1.0f + g * (1.0f - sigmoid));
  } else if (activation == GatedActivation::sigmoid) {
    act = 1.0f / (1.0f + expf(-g));
    derivative = act * (1.0f - act);
  } else {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    const float t = tanhf(k0 * (g + k1 * g * g * g));
    act = 0.5f * g * (1.0f + t);
    derivative = 0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * g * g);
  }
}

// out = act(gate) * up. bf16_in: gate and up are bf16; bf16_out: out is (validate() allows bf16
// outputs from f32 inputs: the f32 result rounded once).
struct Forward {
  __device__ void operator()(unsigned char*, Rows gate, Rows up, Rows out, int64_t rows, int64_t cols,
                             GatedActivation activation, bool bf16_in, bool bf16_out) const {
    for (int64_t flat = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; flat < rows * cols;
         flat += int64_t{gridDim.x} * blockDim.x) {
      const int64_t row = flat / cols, col = flat % cols;
      float act = 0, derivative = 0;
      activation_and_derivative(activation, cuda::load_f32(gate.data, row * gate.stride + col, bf16_in), act,
                                derivative);
      cuda::store_f32(out.data, row * out.stride + col, act * cuda::load_f32(up.data, row * up.stride + col, bf16_in),
                      bf16_out);
    }
  }
};

// dgate = dout * up * act'(gate), dup = dout * act(gate).
struct Backward {
  __device__ void operator()(unsigned char*, Rows gate, Rows up, Rows dout, Rows dgate, Rows dup, int64_t rows,
                             int64_t cols, GatedActivation activation, bool bf16_in, bool bf16_out) const {
    for (int64_t flat = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; flat < rows * cols;
         flat += int64_t{gridDim.x} * blockDim.x) {
      const int64_t row = flat / cols, col = flat % cols;
      float act = 0, derivative = 0;
      activation_and_derivative(activation, cuda::load_f32(gate.data, row * gate.stride + col, bf16_in), act,
                                derivative);
      const float gradient = cuda::load_f32(dout.data, row * dout.stride + col, bf16_in);
      const float up_value = cuda::load_f32(up.data, row * up.stride + col, bf16_in);
      cuda::store_f32(dgate.data, row * dgate.stride + col, gradient * up_value * derivative, bf16_out);
      cuda::store_f32(dup.data, row * dup.stride + col, gradient * act, bf16_out);
    }
  }
};

template <class Launcher>
void run_forward(const GatedActivationArgs& args, Launcher& launcher) {
  const int64_t rows = args.gate.dim(0), cols = args.gate.dim(1);
  if (rows * cols == 0) return;
  launcher.launch("gated_activation (cuda)", dim3(cuda::grid_stride_blocks(rows * cols, kThreads)), kThreads, 0,
                  Forward{}, rows_of(args.gate), rows_of(args.up), rows_of(args.out), rows, cols, args.activation,
                  args.gate.dtype == DType::bf16, args.out.dtype == DType::bf16);
}

template <class Launcher>
void run_backward(const GatedActivationBackwardArgs& args, Launcher& launcher) {
  const int64_t rows = args.gate.dim(0), cols = args.gate.dim(1);
  if (rows * cols == 0) return;
  launcher.launch("gated_activation_backward (cuda)", dim3(cuda::grid_stride_blocks(rows * cols, kThreads)), kThreads,
                  0, Backward{}, rows_of(args.gate), rows_of(args.up), rows_of(args.dout), rows_of(args.dgate),
                  rows_of(args.dup), rows, cols, args.activation, args.gate.dtype == DType::bf16,
                  args.dgate.dtype == DType::bf16);
}

}  // namespace lathe::gated_activation_cuda
