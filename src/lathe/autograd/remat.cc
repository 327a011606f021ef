#include "lathe/autograd/remat.h"

#include <memory>

namespace lathe {

const char* to_string(RematPolicy policy) {
  switch (policy) {
    case RematPolicy::save_all:
      return "save_all";
    case RematPolicy::recompute_layer:
      return "recompute_layer";
    case RematPolicy::save_matmuls:
      return "save_matmuls";
  }
  return "?";
}

}  // namespace lathe

namespace lathe::autograd {

Var rematerialize(Tape& tape, RematPolicy policy, const Var& input, const Region& region) {
  if (policy == RematPolicy::save_all || !tape.recording()) return region(tape, input);

  auto stash = std::make_shared<MatmulStash>();
  stash->mode = policy == RematPolicy::save_matmuls ? MatmulStash::Mode::record : MatmulStash::Mode::off;
  Var output;
  {
    // Recorded on a scratch tape that is dropped at once, freeing everything the region saved.
    Tape first_pass(tape.precision());
    first_pass.set_matmul_stash(stash.get());
    Var output_inside = region(first_pass, make_var(input->value, input->requires_grad));
    output = make_var(output_inside->value, true);
  }
  const Precision precision = tape.precision();
  tape.record([input, output, stash, region, precision] {
    if (stash->mode == MatmulStash::Mode::record) stash->mode = MatmulStash::Mode::replay;
    Tape second_pass(precision);
    second_pass.set_matmul_stash(stash.get());
    Var input_inside = make_var(input->value, input->requires_grad);
    Var output_inside = region(second_pass, input_inside);
    second_pass.backward(output_inside, output->grad);
    if (input_inside->grad.defined()) accumulate_grad(input, input_inside->grad, true);
  });
  return output;
}

}  // namespace lathe::autograd
