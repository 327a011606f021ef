// Mamba-2 SSD scan (state-space duality), the math of transformers' Mamba2Mixer.torch_forward
// after the input projection, the convolution and dt's softplus: per batch b and head h (group
// h / (H / G) of B and C), with state h (P, N):
//   h_t = exp(dt_t A_h) h_{t-1} + dt_t x_t B_t^T
//   y_t = h_t C_t + D_h x_t
// dt is the final step size (softplus(dt + dt_bias), clamped, as the caller computes it), A the
// decay per head (-exp(A_log)), D the optional skip per head. h starts at initial_state (zeros
// when absent); final_state receives h after the last token and may alias initial_state (a decode
// step updating the state cache in place).
// The fast path is the chunked SSD form (chunk size a config, 64 by default): per chunk,
// gamma = cumsum(dt A), Y = exp(gamma) (C h0^T) + (C B^T * exp(gamma_i - gamma_j), j <= i)(dt x),
// h' = exp(gamma_last) h0 + (dt x)^T (exp(gamma_last - gamma) B), all small GEMMs. The float64
// reference is the plain token-by-token recurrence above (a different algorithm).
// Backward gives dx, ddt, dA, dB, dC (summed over the heads of a group), dD (when D is given) and
// d_initial_state (when initial_state is given), from dy and d_final_state (optional: zero).
// f32 tensors, contiguous. Each (batch, head) is one task; dB, dC, dA and dD partials are summed
// in a fixed order afterwards: results are bitwise reproducible for any thread count.
// Errors: lathe::Error naming the op and argument for wrong ranks, shapes, dtypes, strides or
// heads not a multiple of the groups.
// Implementations: the CPU kernels (chunked, ssd_scan_kernels.cc) and, in builds with the CUDA
// backend, the token-by-token recurrence on the GPU (ssd_scan_cuda.cu over ssd_scan_cuda_body.h,
// which "cuda_emulated" runs on the host; state <= 256, head_dim <= 1024).
#pragma once

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

struct SsdScanArgs {
  TensorView x;              // (B, T, H, P)
  TensorView dt;             // (B, T, H)     step size after softplus, > 0
  TensorView a;              // (H)           decay per head, < 0
  TensorView b, c;           // (B, T, G, N)  H a multiple of G
  TensorView d;              // (H)           optional skip
  TensorView initial_state;  // (B, H, P, N)  optional (data == nullptr: zeros)
  TensorView y;              // (B, T, H, P)  output
  TensorView final_state;    // (B, H, P, N)  optional output; may alias initial_state
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(dt), visit(a), visit(b), visit(c), visit(d), visit(initial_state), visit(y), visit(final_state);
  }
};

struct SsdScanBackwardArgs {
  TensorView x, dt, a, b, c, d, initial_state;  // the forward's inputs (d, initial_state optional)
  TensorView dy;                                // (B, T, H, P)
  TensorView d_final_state;                     // (B, H, P, N)  optional (absent: zero)
  TensorView dx, ddt, da, db, dc;               // outputs shaped like x, dt, a, b, c
  TensorView dd;                                // (H) output, required exactly when d is given
  TensorView d_initial_state;                   // (B, H, P, N) output, required exactly when initial_state is
  template <class Visit>
  void visit_tensors(Visit&& visit) {
    visit(x), visit(dt), visit(a), visit(b), visit(c), visit(d), visit(initial_state), visit(dy), visit(d_final_state);
    visit(dx), visit(ddt), visit(da), visit(db), visit(dc), visit(dd), visit(d_initial_state);
  }
};

struct SsdScanCpuConfig {
  int64_t chunk = 64;  // tokens per chunk of the SSD form
  template <class Visit>
  void visit(Visit&& field) {
    field("chunk", chunk);
  }
};

void ssd_scan(const SsdScanArgs& args, const Dispatch& dispatch = {});
void ssd_scan_backward(const SsdScanBackwardArgs& args, const Dispatch& dispatch = {});

void validate(const SsdScanArgs& args);
void validate(const SsdScanBackwardArgs& args);

// The token-by-token recurrence in T (double: the oracle; float: the naive baseline); the
// backward stores every state and runs the recurrence's reverse mode.
template <class T>
void ssd_scan_reference(const SsdScanArgs& args);
template <class T>
void ssd_scan_backward_reference(const SsdScanBackwardArgs& args);

// FLOPs of the chunked algorithm at the default chunk (triangular products at half), minimum bytes.
OpCost ssd_scan_cost(const SsdScanArgs& args);
OpCost ssd_scan_backward_cost(const SsdScanBackwardArgs& args);

const Op<SsdScanArgs, SsdScanCpuConfig>& ssd_scan_op();
const Op<SsdScanBackwardArgs, SsdScanCpuConfig>& ssd_scan_backward_op();

}  // namespace lathe
