// The clamped SwiGLU of one (gate, up) pair and its gradient, in T: what the reference (double and
// float), the CPU kernels and the CUDA kernels (clamped_swiglu_cuda_body.h) all compute, so every
// implementation takes the same steps. min and clamp as (b < a ? b : a): a NaN input stays NaN.
// The functions have internal linkage (an unnamed namespace): the per-ISA kernel files include
// this header, and one shared inline definition compiled with AVX-512 flags could otherwise stand
// in for the scalar build's at link time.
#pragma once

#include <cmath>

#include "lathe/core/host_device.h"

namespace lathe::clamped_swiglu_math {
namespace {

template <class T>
LATHE_HOST_DEVICE T sigmoid(T x) {
  using std::exp;
  return T(1) / (T(1) + exp(-x));
}

template <class T>
LATHE_HOST_DEVICE T forward(T gate, T up, T alpha, T limit) {
  const T g = limit < gate ? limit : gate;
  const T u = limit < up ? limit : (up < -limit ? -limit : up);
  return (u + T(1)) * g * sigmoid(alpha * g);
}

template <class T>
LATHE_HOST_DEVICE void backward(T gate, T up, T dy, T alpha, T limit, T* d_gate, T* d_up) {
  const T g = limit < gate ? limit : gate;
  const T u = limit < up ? limit : (up < -limit ? -limit : up);
  const T s = sigmoid(alpha * g);
  *d_gate = gate <= limit ? dy * (u + T(1)) * (s + alpha * g * s * (T(1) - s)) : T(0);
  *d_up = up >= -limit && up <= limit ? dy * g * s : T(0);
}

}  // namespace
}  // namespace lathe::clamped_swiglu_math
