// Activation rematerialisation: run a region (one transformer layer) so that its backward
// recomputes what it did not keep.
//   save_all:        the region records onto the outer tape as usual (everything saved).
//   recompute_layer: the first forward keeps only the region's input; backward re-runs the region
//                    on a fresh tape and backpropagates through it.
//   save_matmuls:    like recompute_layer, but the matmul outputs of the first forward are kept and
//                    replayed during recomputation, so only norms, activations, RoPE and attention
//                    are recomputed.
// The region function must be deterministic (the library's kernels are, for a fixed thread count),
// so the recomputed values equal the first forward's bit for bit.
#pragma once

#include <functional>

#include "lathe/autograd/tape.h"

namespace lathe {

// Named policies (train.remat in a config).
enum class RematPolicy {
  save_all,         // keep every activation the backward needs
  recompute_layer,  // keep only each layer's input; re-run the layer's forward in backward
  save_matmuls,     // keep matmul outputs; recompute norms, activations, attention
};
const char* to_string(RematPolicy policy);

}  // namespace lathe

namespace lathe::autograd {

using Region = std::function<Var(Tape& tape, const Var& input)>;

// Runs region(tape, input) under the policy; returns its output.
Var rematerialize(Tape& tape, RematPolicy policy, const Var& input, const Region& region);

}  // namespace lathe::autograd
