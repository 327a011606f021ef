// The per-head gates of the linear-attention layers on the tape: the head_gate op
// (ops/head_gate/head_gate.h) under Precision::fast, on either device, and its float64 reference
// under reference_f64. Mamba-2's step size and decay (autograd/mamba2_ops.h) and Qwen3-Next's
// delta-rule gates (autograd/qwen3_next_ops.h) are made of it.
#pragma once

#include <limits>

#include "lathe/autograd/tape.h"
#include "lathe/ops/head_gate/head_gate.h"

namespace lathe::autograd {

// x: (..., heads); bias, a_log: (heads) or null -> (..., heads):
//   out = (a_log ? -exp(a_log) : 1) * f(x + (bias ? bias : 0)),  f as HeadGateActivation says
// (softplus clamped to [lower, upper]). The bias and a_log gradients are summed over the rows in a
// fixed order: the same bits for any thread count.
Var head_gate(Tape& tape, const Var& x, const Var& bias, const Var& a_log, HeadGateActivation activation,
              double lower = -std::numeric_limits<double>::infinity(),
              double upper = std::numeric_limits<double>::infinity());

}  // namespace lathe::autograd
