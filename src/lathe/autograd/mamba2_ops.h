// The element-wise pieces of Mamba-2's mixer (transformers' Mamba2Mixer.torch_forward) around
// the kernel library's ssd_scan and short_conv (autograd/linear_recurrence_ops.h), in the style of
// autograd/ops.h: f32 under Precision::fast, f64 under reference_f64, each with its backward. Each
// is a library op, which runs on either device: the step size and the decay are the head_gate op
// (autograd/head_gate_ops.h), the gated RMSNorm the gated_rms_norm op. Sums over rows (the weight
// and bias gradients) run in a fixed order: bitwise reproducible for any thread count.
#pragma once

#include "lathe/autograd/tape.h"

namespace lathe::autograd {

// dt: (rows, H) the raw projection; bias: (H) -> (rows, H) the step size
//   clamp(softplus(dt + bias), lower, upper)   (upper <= 0: no upper clamp)
// softplus as torch's (x > 20: x). The gradient is zero where the clamp holds the value.
Var mamba2_step_size(Tape& tape, const Var& dt, const Var& bias, double lower, double upper);

// a_log: (H) -> (H) the decay per head, -exp(a_log).
Var negative_exp(Tape& tape, const Var& a_log);

// y, z: (..., W); weight: (W) -> (..., W): the gated RMSNorm of Mamba-2 (MambaRMSNormGated,
// norm_before_gate=False): g = y * silu(z), normalised over each of `groups` groups of W / groups
// columns, times weight: the gated_rms_norm op (ops/gated_rms_norm; its float64 reference under
// reference_f64), on either device. groups = 1 normalises the whole row.
Var gated_group_rms_norm(Tape& tape, const Var& y, const Var& z, const Var& weight, int64_t groups, double eps);

}  // namespace lathe::autograd
