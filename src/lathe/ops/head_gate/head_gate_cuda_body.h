// The CUDA kernels of head_gate and its backward as LATHE_HOST_DEVICE functions, launched by
// head_gate_cuda.cu (one GPU thread per index) and run on the host by the CPU kernels
// (head_gate_kernels.cc, split over threads) and by "cuda_emulated" (index after index), so every
// implementation takes the same steps:
//   forward:  one index per element: out = scale * f(x + bias).
//   backward: one index per element: dx; then one per (block of kRowsPerBlock rows, head): the
//             block's share of dbias and d_a_log, each in row order; then one per head: the blocks'
//             shares added in block order.
// Internal linkage (an unnamed namespace): the per-ISA kernel files include this header too.
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/ops/head_gate/head_gate.h"

namespace lathe::head_gate_cuda {
namespace {

constexpr int64_t kRowsPerBlock = 64;

struct Inputs {
  const float *x, *bias, *a_log;  // bias and a_log may be null
  int64_t rows, heads;
  HeadGateActivation activation;
  float lower, upper;
  LATHE_HOST_DEVICE int64_t elements() const { return rows * heads; }
  LATHE_HOST_DEVICE int64_t blocks() const { return (rows + kRowsPerBlock - 1) / kRowsPerBlock; }
};

template <class Args>
Inputs inputs_of(const Args& args) {
  return {static_cast<const float*>(args.x.data),
          static_cast<const float*>(args.bias.data),
          static_cast<const float*>(args.a_log.data),
          args.x.dim(0),
          args.x.dim(1),
          args.activation,
          static_cast<float>(args.lower),
          static_cast<float>(args.upper)};
}

LATHE_HOST_DEVICE inline float sigmoid(float u) { return 1.0f / (1.0f + expf(-u)); }

// f(u) into value and f'(u) into slope (the clamp's slope 0 outside [lower, upper]).
LATHE_HOST_DEVICE inline void gate_and_slope(const Inputs& in, float u, float& value, float& slope) {
  if (in.activation == HeadGateActivation::softplus) {
    const float soft = u > 20.0f ? u : log1pf(expf(u));
    const bool passes = soft >= in.lower && soft <= in.upper;
    value = soft < in.lower ? in.lower : (soft > in.upper ? in.upper : soft);
    slope = passes ? (u > 20.0f ? 1.0f : sigmoid(u)) : 0.0f;
  } else if (in.activation == HeadGateActivation::sigmoid) {
    value = sigmoid(u);
    slope = value * (1.0f - value);
  } else {
    value = -expf(u);
    slope = value;
  }
}

LATHE_HOST_DEVICE inline float scale_of(const Inputs& in, int64_t head) {
  return in.a_log ? -expf(in.a_log[head]) : 1.0f;
}

LATHE_HOST_DEVICE inline float input_of(const Inputs& in, int64_t i, int64_t head) {
  return in.bias ? in.x[i] + in.bias[head] : in.x[i];
}

// index over (rows, heads).
LATHE_HOST_DEVICE inline void forward_element(const Inputs& in, int64_t i, float* out) {
  const int64_t head = i % in.heads;
  float value, slope;
  gate_and_slope(in, input_of(in, i, head), value, slope);
  out[i] = scale_of(in, head) * value;
}

// index over (rows, heads): dx = dout * scale * f'(u).
LATHE_HOST_DEVICE inline void backward_element(const Inputs& in, const float* dout, int64_t i, float* dx) {
  const int64_t head = i % in.heads;
  float value, slope;
  gate_and_slope(in, input_of(in, i, head), value, slope);
  dx[i] = dout[i] * (scale_of(in, head) * slope);
}

// index over (blocks, heads): the block's rows' sums in row order, of dx into bias_partial[index]
// and of dout * out into a_log_partial[index] (either pointer null: that sum skipped). The sums run
// in double: their terms reach |scale * softplus| ~ 180 with either sign, and an f32 running sum
// over a block's rows lost ~10 ulps of the result (the op contract's bound), a parameter gradient
// summed over every token of a batch.
LATHE_HOST_DEVICE inline void block_sums(const Inputs& in, const float* dout, const float* dx, int64_t index,
                                         float* bias_partial, float* a_log_partial) {
  const int64_t head = index % in.heads, block = index / in.heads;
  const int64_t end = (block + 1) * kRowsPerBlock < in.rows ? (block + 1) * kRowsPerBlock : in.rows;
  const double scale = scale_of(in, head);
  double bias_sum = 0.0, a_log_sum = 0.0;
  for (int64_t row = block * kRowsPerBlock; row < end; ++row) {
    const int64_t i = row * in.heads + head;
    if (bias_partial) bias_sum += dx[i];
    if (a_log_partial) {
      float value, slope;
      gate_and_slope(in, input_of(in, i, head), value, slope);
      a_log_sum += static_cast<double>(dout[i]) * (scale * value);
    }
  }
  if (bias_partial) bias_partial[index] = static_cast<float>(bias_sum);
  if (a_log_partial) a_log_partial[index] = static_cast<float>(a_log_sum);
}

// head: total[head] = the blocks' partial sums in block order (summed in double).
LATHE_HOST_DEVICE inline void head_total(const Inputs& in, const float* partial, int64_t head, float* total) {
  double sum = 0.0;
  for (int64_t block = 0; block < in.blocks(); ++block) sum += partial[block * in.heads + head];
  total[head] = static_cast<float>(sum);
}

}  // namespace
}  // namespace lathe::head_gate_cuda
