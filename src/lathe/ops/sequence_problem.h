// The registered problems of the sequence ops (gated_delta_rule, ssd_scan, short_conv and their
// backwards) share two pieces: a public random() their input builders call, and, for the
// forwards, one main output plus an optional final state, both swapped for the reference's
// buffers when the reference runs.
#pragma once

#include "lathe/ops/problem.h"

namespace lathe {

template <class Args, class Config>
class SequenceProblem : public TypedProblem<Args, Config> {
 public:
  using Cost = OpCost (*)(const Args&);
  SequenceProblem(const Op<Args, Config>& op, typename TypedProblem<Args, Config>::Entry entry, Cost cost)
      : TypedProblem<Args, Config>(op, std::move(entry)), cost_(cost) {}
  // A seeded uniform f32 input owned by the problem.
  TensorView random(const Shape& shape, uint64_t seed, double low, double high) {
    return this->random_tensor(shape, DType::f32, seed, low, high);
  }
  OpCost cost() const override { return cost_(this->args_); }

 private:
  Cost cost_;
};

// A forward whose Args have the main output `Output` and an optional `final_state`.
template <class Args, class Config, TensorView Args::*Output>
class SequenceForwardProblem : public SequenceProblem<Args, Config> {
 public:
  using Reference = void (*)(const Args&);
  SequenceForwardProblem(const Op<Args, Config>& op, typename TypedProblem<Args, Config>::Entry entry,
                         typename SequenceProblem<Args, Config>::Cost cost, const char* output_name, Reference exact,
                         Reference naive)
      : SequenceProblem<Args, Config>(op, std::move(entry), cost),
        output_name_(output_name),
        exact_(exact),
        naive_(naive) {}

 protected:
  std::vector<std::pair<std::string, TensorView>> outputs() const override {
    std::vector<std::pair<std::string, TensorView>> list = {{output_name_, this->args_.*Output}};
    if (this->args_.final_state.data) list.push_back({"final_state", this->args_.final_state});
    return list;
  }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    Args args = this->args_;
    args.*Output = into[0];
    if (args.final_state.data) args.final_state = into[1];
    (use_double ? exact_ : naive_)(args);
  }

 private:
  std::string output_name_;
  Reference exact_, naive_;
};

}  // namespace lathe
