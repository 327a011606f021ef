// The elementwise ops the Qwen3-Next / Qwen3.5 layer (models/qwen3_next_layer.h) adds around the
// gated delta rule and gated attention, in the style of autograd/ops.h: a float and a double path
// (the tape's precision picks), each recording its own backward; the math follows transformers 5.x
// models/qwen3_next/modeling_qwen3_next.py. Each is made of library ops, which run on either
// device: the delta-rule gates of head_gate (autograd/head_gate_ops.h), sigmoid_multiply of the
// gated_activation op's GLU, gather_rows of an embedding lookup.
#pragma once

#include <vector>

#include "lathe/autograd/tape.h"

namespace lathe::autograd {

// x, gate: (rows, width) -> x * sigmoid(gate) elementwise (Qwen3NextAttention's output gate): the
// gated_activation op's GLU (act=sigmoid), on either device.
Var sigmoid_multiply(Tape& tape, const Var& x, const Var& gate);

struct DeltaGates {
  Var g;     // (rows, heads): log decay, -exp(a_log) * softplus(a + dt_bias) (<= 0)
  Var beta;  // (rows, heads): sigmoid(b), the delta rule's write strength
};

// a, b: (rows, heads); a_log, dt_bias: (heads) -> the gated delta rule's per-token gates
// (Qwen3NextGatedDeltaNet.forward). d a_log and d dt_bias are summed over rows in a fixed order.
DeltaGates gated_delta_gates(Tape& tape, const Var& a, const Var& b, const Var& a_log, const Var& dt_bias);

// weight: (out, in); rows: distinct indices into out -> (rows.size(), in), weight's rows in the
// given order (and its bf16 copy's rows when it has one). Qwen3-Next's in_proj_qkvz groups its rows
// per key head ([q, k, v, z] of each); gathered into the convolution's channel order, two plain
// projections produce the convolution's input and z contiguous, so no activation is split or
// concatenated. Backward adds row i of the gradient to row rows[i] of weight's gradient (the
// embedding op's backward: a weight-sized gradient, zero outside the rows).
Var gather_rows(Tape& tape, const Var& weight, std::vector<int64_t> rows);

}  // namespace lathe::autograd
