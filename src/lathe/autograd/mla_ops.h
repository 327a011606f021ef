// Data movement that multi-head latent attention (models/mla_layer.h) needs between its
// projections and attention: splitting a tensor's last dimension into pieces, and joining two
// per-head tensors along it while broadcasting a one-head operand over the heads (DeepSeek's RoPE
// key, shared by every head). 2-D copies (cuda::copy) in f32 or f64 on the host or the GPU;
// backward copies the gradients back (and sums the broadcast operand's over the heads, in head
// order, with the add op).
#pragma once

#include <span>
#include <vector>

#include "lathe/autograd/tape.h"

namespace lathe::autograd {

// x: (..., sum(widths)) -> one Var per width, (..., widths[i]), in order. A piece that receives no
// gradient contributes zeros to x's.
std::vector<Var> split_last_dim(Tape& tape, const Var& x, std::span<const int64_t> widths);

// a: (..., heads, wa), b: (..., heads or 1, wb) with equal leading dims -> (..., heads, wa + wb):
// each head's row is a's row then b's (b's single row for every head when b has one head).
Var concat_heads(Tape& tape, const Var& a, const Var& b);

}  // namespace lathe::autograd
