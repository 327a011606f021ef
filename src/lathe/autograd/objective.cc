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
      Tensor seed = Tensor::empty({1}, loss->value.dtype());
      fill_value(seed, 1.0);
      accumulate_grad(loss, seed, true);
    }
  });
  return out;
}

}  // namespace lathe::autograd
