// Differentiable linear-recurrence ops over the kernel library's ops/gated_delta_rule,
// ops/ssd_scan and ops/short_conv, in the style of autograd/ops.h: each runs the fast op (or its
// float64 reference, per the tape's precision) and records the op's own backward. Each takes an
// optional carried-in state (a null Var: zeros) and returns the final state when asked (null
// otherwise), so a family can chain segments or hand the state to decoding; gradients flow into
// the initial state as into any input. Optional inputs (a null Var) get no gradient.
#pragma once

#include "lathe/autograd/tape.h"
#include "lathe/ops/gated_delta_rule/gated_delta_rule.h"
#include "lathe/ops/short_conv/short_conv.h"
#include "lathe/ops/ssd_scan/ssd_scan.h"

namespace lathe::autograd {

struct RecurrentOutput {
  Var out;          // the op's output
  Var final_state;  // the state after the last token, or null when not asked for
};

// q, k: (B, T, Hk, Dk); v: (B, T, Hv, Dv); g, beta: (B, T, Hv); initial_state: (B, Hv, Dk, Dv) or
// null -> o (B, T, Hv, Dv) and the final state (ops/gated_delta_rule.h).
RecurrentOutput gated_delta_rule(Tape& tape, const Var& q, const Var& k, const Var& v, const Var& g, const Var& beta,
                                 const Var& initial_state, const GatedDeltaRuleOptions& options, bool want_final_state);

// x: (B, T, H, P); dt: (B, T, H); a: (H); b, c: (B, T, G, N); d: (H) or null; initial_state:
// (B, H, P, N) or null -> y (B, T, H, P) and the final state (ops/ssd_scan.h).
RecurrentOutput ssd_scan(Tape& tape, const Var& x, const Var& dt, const Var& a, const Var& b, const Var& c,
                         const Var& d, const Var& initial_state, bool want_final_state);

// x: (B, T, C); weight: (C, K); bias: (C) or null; initial_state: (B, K - 1, C) or null -> y
// (B, T, C) and the final state (ops/short_conv.h).
RecurrentOutput short_conv(Tape& tape, const Var& x, const Var& weight, const Var& bias, const Var& initial_state,
                           const ShortConvOptions& options, bool want_final_state);

}  // namespace lathe::autograd
