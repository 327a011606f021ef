// A training objective made of several losses that each seed their own backward: the fused
// cross-entropy (autograd/ops.h) computes its gradients in the forward, already scaled by its
// grad_scale, and must be the root of the graph. with_extra_losses returns `reported` as the root
// while also seeding every extra loss, so tape.backward(result) carries all their gradients
// (DeepSeek-V3's multi-token prediction adds one cross-entropy per module this way).
#pragma once

#include <vector>

#include "lathe/autograd/tape.h"

namespace lathe::autograd {

// reported, extra: one-element losses -> a Var with reported's value whose backward seeds
// reported and every extra loss with 1.
Var with_extra_losses(Tape& tape, const Var& reported, const std::vector<Var>& extra);

}  // namespace lathe::autograd
