#include "lathe/autograd/objective.h"

#include "lathe/core/error.h"

namespace lathe::autograd {

Var with_extra_losses(Tape& tape, const Var& reported, const std::vector<Var>& extra) {
  bool requires_grad = reported->requires_grad;
  for (const Var& loss : extra) {
    LATHE_ASSERT(loss->value.numel() == 1);
    requires_grad = requires_grad || loss->requires_grad;
  }
  Var out = make_var(reported->value, requires_grad);
  if (!tape.recording() || !requires_grad) return out;
  tape.record([reported, extra, out] {
    if (reported->requires_grad) accumulate_grad(reported, out->grad, false);
    for (const Var& loss : extra) {
      if (!loss->requires_grad) continue;
      accumulate_grad(loss, one_beside(loss->value), true);
    }
  });
  return out;
}

}  // namespace lathe::autograd
