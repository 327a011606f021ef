// Per-head gates of the linear-attention layers: an elementwise function of a (rows, heads) input
// plus per-head parameters,
//   u[r, h]   = x[r, h] + bias[h]                       (bias optional: 0 without it)
//   out[r, h] = scale[h] * f(u[r, h]),  scale[h] = -exp(a_log[h])   (a_log optional: 1 without it)
// with f one of
//   softplus:     min(max(softplus(u), lower), upper)   (softplus(u) = log(1 + e^u), u itself above 20,
//                                                        as torch's; the clamp's gradient passes where
//                                                        lower <= softplus(u) <= upper, as torch.clamp's)
//   sigmoid:      1 / (1 + e^-u)
//   negative_exp: -e^u
// Its uses: Mamba-2's step size dt = clamp(softplus(dt + dt_bias)) and decay A = -exp(A_log) (x the
// (1, heads) A_log); Qwen3-Next's delta-rule gates g = -exp(A_log) softplus(a + dt_bias) and
// beta = sigmoid(b).
// Backward, from dout:
//   dx[r, h]    = dout[r, h] * scale[h] * f'(u[r, h])
//   dbias[h]    = sum over r of dx[r, h]               (optional output)
//   d_a_log[h]  = sum over r of dout[r, h] * out[r, h]  (optional output; only with a_log)
// The sums: per block of 64 rows each head's sum in row order, then the blocks in order (in double), on
// the CPU and the GPU alike (head_gate_cuda_body.h): the same bits for any thread count and config.
// x, out, dout, dx: (rows, heads) f32 contiguous; bias, a_log, dbias, d_a_log: (heads) f32.
// Errors (lathe::Error): wrong rank, shape or dtype, non-contiguous tensors, d_a_log without a_log,
// a NaN bound or lower > upper.
// On the GPU: head_gate_cuda.h ("cuda_emulated" runs its kernels on the host).
#pragma once

#include <limits>

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

enum class HeadGateActivation { softplus, sigmoid, negative_exp };
const char* head_gate_activation_name(HeadGateActivation activation);  // "softplus", "sigmoid", "negative_exp"

struct HeadGateArgs {
  TensorView x;      // (rows, heads) f32
  TensorView bias;   // (heads) f32, optional (data may be null)
  TensorView a_log;  // (heads) f32, optional (data may be null)
  TensorView out;    // (rows, heads) f32 output
  HeadGateActivation activation = HeadGateActivation::softplus;
  double lower = -std::numeric_limits<double>::infinity();  // softplus's clamp only
  double upper = std::numeric_limits<double>::infinity();
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(bias), visit(a_log), visit(out);
  }
};

struct HeadGateBackwardArgs {
  TensorView x;        // (rows, heads) f32, as in the forward
  TensorView bias;     // (heads) f32, optional, as in the forward
  TensorView a_log;    // (heads) f32, optional, as in the forward
  TensorView dout;     // (rows, heads) f32
  TensorView dx;       // (rows, heads) f32 output
  TensorView dbias;    // (heads) f32 output, optional (data may be null)
  TensorView d_a_log;  // (heads) f32 output, optional; needs a_log
  HeadGateActivation activation = HeadGateActivation::softplus;
  double lower = -std::numeric_limits<double>::infinity();
  double upper = std::numeric_limits<double>::infinity();
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(bias), visit(a_log), visit(dout), visit(dx), visit(dbias), visit(d_a_log);
  }
};

struct HeadGateCpuConfig {
  int64_t elements_per_task = 16384;  // minimum elements (and row-block x head sums) per parallel chunk
  template <class Visit>
  void visit(Visit&& field) {
    field("elements_per_task", elements_per_task);
  }
};

// Validate, then run the best implementation (see Op::run for the config order).
void head_gate(const HeadGateArgs& args, const Dispatch& dispatch = {});
void head_gate_backward(const HeadGateBackwardArgs& args, const Dispatch& dispatch = {});

// Throw lathe::Error naming the argument, expected and actual shape or dtype.
void validate(const HeadGateArgs& args);
void validate(const HeadGateBackwardArgs& args);

// Plain loops computing in T (double: the oracle and autograd's exact mode, on f64 tensors too;
// float: the naive baseline); the sums in row order.
template <class T>
void head_gate_reference(const HeadGateArgs& args);
template <class T>
void head_gate_backward_reference(const HeadGateBackwardArgs& args);

OpCost head_gate_cost(const HeadGateArgs& args);
OpCost head_gate_backward_cost(const HeadGateBackwardArgs& args);

const Op<HeadGateArgs, HeadGateCpuConfig>& head_gate_op();
const Op<HeadGateBackwardArgs, HeadGateCpuConfig>& head_gate_backward_op();

}  // namespace lathe
