// The CUDA kernels of short_conv and its backward as LATHE_HOST_DEVICE functions, launched by
// short_conv_cuda.cu (one GPU thread per index) and run on the host, index after index, by the
// "cuda_emulated" implementation (short_conv.cc). Notation of short_conv.h: x~ of batch b is the
// K - 1 state rows, then x's T rows; extended position e = t + j reads weight column j for output
// token t (e < K - 1: the state, else x token e - (K - 1)).
//   forward:        one thread per (b, t, c) of y; then one per (b, c) writes final_state in
//                   increasing order (it may alias initial_state: entry i reads state entry i + T,
//                   not yet overwritten).
//   backward input: one thread per (b, e, c) of x~: dx (e >= K - 1) or d_initial_state; it
//                   recomputes the K pre-activations it needs (K^2 multiply-adds, K = 4).
//   backward weight: one thread per (token chunk, c) sums its chunk's K + 1 products (dweight,
//                   dbias) into partials; then one per c adds the chunks in order (deterministic).
#pragma once

#include <cmath>
#include <cstdint>

#include "lathe/core/host_device.h"
#include "lathe/ops/short_conv/short_conv.h"

namespace lathe::short_conv_cuda {
namespace {  // internal linkage: each includer (the .cu and short_conv.cc) has its own copy

// Tokens per chunk of the backward's weight partial sums.
constexpr int64_t kTokensPerChunk = 256;

struct Params {
  const float* x;        // (B, T, C)
  const float* weight;   // (C, K)
  const float* bias;     // (C) or null
  const float* initial;  // (B, K - 1, C) or null
  int64_t batch, seq, channels, kernel;
  bool silu;
};

// The inputs the forward and the backward share (the Args' views are f32 and contiguous: validated).
template <class Args>
Params params_of(const Args& args) {
  return {static_cast<const float*>(args.x.data),
          static_cast<const float*>(args.weight.data),
          static_cast<const float*>(args.bias.data),
          static_cast<const float*>(args.initial_state.data),
          args.x.dim(0),
          args.x.dim(1),
          args.x.dim(2),
          args.weight.dim(1),
          args.options.silu};
}

LATHE_HOST_DEVICE inline int64_t chunks(const Params& p) {
  return (p.batch * p.seq + kTokensPerChunk - 1) / kTokensPerChunk;
}

// x~[b, e, c] (zero for a state row without initial_state).
LATHE_HOST_DEVICE inline float extended(const Params& p, int64_t b, int64_t e, int64_t c) {
  const int64_t state_rows = p.kernel - 1;
  if (e >= state_rows) return p.x[(b * p.seq + e - state_rows) * p.channels + c];
  return p.initial ? p.initial[(b * state_rows + e) * p.channels + c] : 0.0f;
}

LATHE_HOST_DEVICE inline float pre_activation(const Params& p, int64_t b, int64_t t, int64_t c) {
  float z = p.bias ? p.bias[c] : 0.0f;
  for (int64_t j = 0; j < p.kernel; ++j) z += p.weight[c * p.kernel + j] * extended(p, b, t + j, c);
  return z;
}

// dz of output (b, t, c): dy times silu'(z) (dy itself without the SiLU).
LATHE_HOST_DEVICE inline float pre_activation_grad(const Params& p, const float* dy, int64_t b, int64_t t, int64_t c) {
  const float grad = dy[(b * p.seq + t) * p.channels + c];
  if (!p.silu) return grad;
  const float z = pre_activation(p, b, t, c);
  const float sigmoid = 1.0f / (1.0f + expf(-z));
  return grad * sigmoid * (1.0f + z * (1.0f - sigmoid));
}

// index over (B, T, C).
LATHE_HOST_DEVICE inline void forward_element(const Params& p, int64_t index, float* y) {
  const int64_t c = index % p.channels, t = index / p.channels % p.seq, b = index / (p.channels * p.seq);
  const float z = pre_activation(p, b, t, c);
  y[index] = p.silu ? z / (1.0f + expf(-z)) : z;
}

// index over (B, C): final_state[b, i, c] = x~[b, T + i, c], i increasing.
LATHE_HOST_DEVICE inline void final_state_column(const Params& p, int64_t index, float* final_state) {
  const int64_t c = index % p.channels, b = index / p.channels, state_rows = p.kernel - 1;
  for (int64_t i = 0; i < state_rows; ++i)
    final_state[(b * state_rows + i) * p.channels + c] = extended(p, b, p.seq + i, c);
}

// index over (B, K - 1 + T, C): the gradient of x~[b, e, c], into dx or d_initial_state (null: the
// state rows are skipped). d_final (or null) adds to the last K - 1 positions.
LATHE_HOST_DEVICE inline void backward_input_element(const Params& p, const float* dy, const float* d_final,
                                                     int64_t index, float* dx, float* d_initial) {
  const int64_t state_rows = p.kernel - 1, extended_rows = state_rows + p.seq;
  const int64_t c = index % p.channels, e = index / p.channels % extended_rows,
                b = index / (p.channels * extended_rows);
  if (e < state_rows && !d_initial) return;
  float grad = 0.0f;
  for (int64_t j = 0; j < p.kernel; ++j) {  // output token t = e - j uses weight column j on x~[e]
    const int64_t t = e - j;
    if (t >= 0 && t < p.seq) grad += pre_activation_grad(p, dy, b, t, c) * p.weight[c * p.kernel + j];
  }
  const int64_t final_row = e - p.seq;  // x~[T + i] is final_state row i
  if (d_final && final_row >= 0) grad += d_final[(b * state_rows + final_row) * p.channels + c];
  if (e >= state_rows)
    dx[(b * p.seq + e - state_rows) * p.channels + c] = grad;
  else
    d_initial[(b * state_rows + e) * p.channels + c] = grad;
}

// index over (chunks, C): partial[chunk][c][j] = sum over the chunk's tokens of dz x~[t + j] (j < K)
// and partial[chunk][c][K] = sum of dz. partial holds chunks * C * (K + 1) floats.
LATHE_HOST_DEVICE inline void backward_weight_partial(const Params& p, const float* dy, int64_t index, float* partial) {
  const int64_t c = index % p.channels, chunk = index / p.channels, stride = p.kernel + 1;
  float* sums = partial + (chunk * p.channels + c) * stride;
  for (int64_t j = 0; j < stride; ++j) sums[j] = 0.0f;
  const int64_t tokens = p.batch * p.seq, end = chunk * kTokensPerChunk + kTokensPerChunk;
  for (int64_t token = chunk * kTokensPerChunk; token < (end < tokens ? end : tokens); ++token) {
    const int64_t b = token / p.seq, t = token % p.seq;
    const float dz = pre_activation_grad(p, dy, b, t, c);
    for (int64_t j = 0; j < p.kernel; ++j) sums[j] += dz * extended(p, b, t + j, c);
    sums[p.kernel] += dz;
  }
}

// index over C: the chunks' partials in chunk order into dweight (C, K) and dbias (C) (or null).
LATHE_HOST_DEVICE inline void backward_weight_total(const Params& p, const float* partial, int64_t c, float* dweight,
                                                    float* dbias) {
  const int64_t stride = p.kernel + 1;
  for (int64_t j = 0; j < stride; ++j) {
    if (j == p.kernel && !dbias) break;
    float sum = 0.0f;
    for (int64_t chunk = 0; chunk < chunks(p); ++chunk) sum += partial[(chunk * p.channels + c) * stride + j];
    float* target = j < p.kernel ? dweight + c * p.kernel + j : dbias + c;  // not a conditional lvalue
    *target = sum;
  }
}

}  // namespace
}  // namespace lathe::short_conv_cuda
