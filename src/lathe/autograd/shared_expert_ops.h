// The shared expert of Qwen2-MoE-style mixture-of-experts layers (models/moe_layer.cc), in the
// style of autograd/ops.h: a gated MLP every token passes through, optionally scaled by a sigmoid
// gate, added to the routed experts' output. Two ops let it run as the routed experts do:
//   gate_up = linear(x, stack_rows({gate_proj, up_proj}))        (tokens, 2 * shared_ffn), one GEMM
//   hidden  = gated_activation_fused(gate_up)                     (tokens, shared_ffn)
//   y       = add_sigmoid_gated(routed, linear(hidden, down_proj), linear(x, shared_expert_gate))
#pragma once

#include <span>

#include "lathe/autograd/tape.h"

namespace lathe::autograd {

// y, x: (rows, d); gate: (rows, 1) -> y + x * sigmoid(gate) per row: the gated shared expert x added
// to the routed experts' output y (y's gradient is the output's, handed on without a copy). The
// gate is a router over one expert with sigmoid scores and the sum its combine (moe_router and
// moe_combine with top-1 and the identity permutation, and their backwards): the same ops on the
// host and the GPU. The reference precision runs plain f64 loops.
Var add_sigmoid_gated(Tape& tape, const Var& y, const Var& x, const Var& gate);

// weights: matrices (out_i, in) of one width -> (sum of out_i, in), their rows stacked in order,
// so that one linear multiplies x by all of them: a gated MLP's gate and up projections become one
// GEMM of twice the width (one pass over x forward and one dx product backward instead of two).
// The stack carries the weights' bf16 copies when they have them (all or none). Backward adds
// each weight's rows of the gradient to that weight's gradient.
Var stack_rows(Tape& tape, std::span<const Var> weights);

}  // namespace lathe::autograd
