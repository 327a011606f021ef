// A suite problem that is a registered op's own problem (ops/<op>/<op>_problem.cc) at one shape:
// the op problem draws the inputs for each seed, computes the float64 and naive references, and
// runs lathe's path (the op's public entry point, with full dispatch: pinned > tuned > heuristic).
// The suite adds only its description and the vendor baseline: the op problem's first benchmark
// peer (matmul: oneDNN / OpenBLAS sgemm), or a composition given as a VendorPath that reads the op
// problem's inputs and writes its outputs (e.g. attention as two sgemms around a plain softmax).
// An InputsFn names the op problem's inputs, so the kernel lab can hand them to a candidate
// (`lathe lab`, `lathe optimize`); without one the lab cannot judge the problem.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/bench/suite/suite_problem.h"

namespace lathe {

class OpSuiteProblem : public SuiteProblem {
 public:
  // Runs the vendor baseline on the op problem's inputs into its outputs.
  using VendorPath = std::function<void(OpProblem& problem)>;
  // The op problem's inputs with their names, in the order a lab candidate receives them
  // (contiguous, row-major).
  using InputsFn = std::function<std::vector<std::pair<std::string, TensorView>>(OpProblem& problem)>;

  // `shape` is the op's ShapeSpec text; info.vendor describes `vendor` (empty: the op's first
  // peer, if it has one, else no vendor row). info.lathe_path defaults to the op's name.
  OpSuiteProblem(SuiteInfo info, std::string op, const std::string& shape, VendorPath vendor = {},
                 InputsFn inputs = {});

  void fill_inputs(uint64_t seed) override;  // a fresh op problem drawn at this seed
  void run_lathe() override { live().run("", nullptr); }
  void run_vendor() override;
  OpCost cost() const override { return live().cost(); }
  std::vector<std::pair<std::string, TensorView>> outputs() const override { return live().outputs(); }
  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    live().reference(use_double, into);
  }
  Tolerance tolerance(const std::string& output) const override { return live().tolerance(output); }
  std::vector<std::pair<std::string, TensorView>> named_inputs() const override {
    return inputs_ ? inputs_(live()) : std::vector<std::pair<std::string, TensorView>>{};
  }
  void prepare_run() override { live().prepare_run(); }
  int64_t buffer_bytes() const override { return live().buffer_bytes(); }
  void add_cold_copy(uint64_t seed) override;
  void use_cold_copy(size_t index) override { live_ = copies_.at(index).get(); }

 private:
  OpProblem& live() const { return *live_; }

  const OpRegistration& op_;
  ShapeSpec shape_;
  VendorPath vendor_;
  InputsFn inputs_;
  std::string peer_;                                // the op's peer used as the vendor ("" if none)
  std::unique_ptr<OpProblem> problem_;              // drawn by fill_inputs
  std::vector<std::unique_ptr<OpProblem>> copies_;  // cache-cold copies
  OpProblem* live_ = nullptr;                       // problem_ or one of copies_
};

// Registers an OpSuiteProblem at a full and a --quick shape.
void add_op_suite_problem(std::vector<SuiteEntry>& entries, const SuiteInfo& info, const std::string& op,
                          const std::string& full, const std::string& quick,
                          const OpSuiteProblem::VendorPath& vendor = {}, const OpSuiteProblem::InputsFn& inputs = {});

// The Args of an op problem built by TypedProblem<Args, Config>, for vendor compositions.
template <class Args, class Config>
const Args& op_problem_args(OpProblem& problem) {
  auto* typed = dynamic_cast<TypedProblem<Args, Config>*>(&problem);
  LATHE_CHECK(typed != nullptr, problem.op_name(), ": not a problem of the expected op");
  return typed->args();
}

}  // namespace lathe
