// A problem of the kernel benchmark suite (`lathe bench --suite`): one computation at one size.
// It is a Problem (ops/problem.h: named outputs, a reference run in double as the oracle and in
// float as the naive same-precision baseline, tolerance, cost) plus what the suite adds: a
// description (SuiteInfo), inputs drawn afresh for each seed, lathe's path and, where one exists, a
// vendor baseline (oneDNN or OpenBLAS in the same process). Two kinds:
//   - a registered op's problem at one shape (suite_op_problem.h): the op problem draws the inputs,
//     computes the reference and runs the op; nothing is restated here;
//   - a composition with no op of its own (fusions, MoE, recurrences, MLA, paged decode): it owns
//     its input and output buffers (add_input / add_output) and writes its reference as plain loops
//     over them (SuiteProblemWithReference), built from the ops' references where an op exists.
// The judge (suite_judge.h) checks both paths on fresh inputs and times them; this file only
// describes the problem.
//
// Paths of buffer-owning problems must read inputs() and output_tensors() on every call, never
// pointers cached at construction: the cache-cold mode swaps in rotated copies of the buffers
// between runs. Scratch buffers a path owns may be kept.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"
#include "lathe/ops/problem.h"

namespace lathe {

struct SuiteInfo {
  std::string name;        // "gqa_attention": unique, used by filters and baselines
  std::string family;      // "llm" (production ops) or "fusion" (GEMM + epilogue, KernelBench level 2 style)
  std::string summary;     // what it computes, one line
  std::string model;       // the real model the shape comes from and how it was scaled
  std::string lathe_path;  // which lathe ops (and plain loops) compute it
  std::string vendor;      // the vendor baseline ("oneDNN matmul + swish post-op"); empty: none
};

// One input or output: its shape, dtype and, for inputs, the uniform range it is drawn from.
struct SuiteTensorSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  double low = -1, high = 1;
};

class SuiteProblem : public Problem {
 public:
  SuiteProblem(SuiteInfo info, std::string shape_text);

  const SuiteInfo& info() const { return info_; }
  const std::string& shape_text() const { return shape_text_; }  // "tokens=512,d=1024" for reports

  // Draws fresh inputs for this seed. Buffer-owning problems draw every input uniformly from its
  // spec's range (stream = input index); those with structured inputs (group sizes, page tables,
  // targets) override it and call it first.
  virtual void fill_inputs(uint64_t seed);
  virtual void run_lathe() = 0;
  virtual bool has_vendor() const { return !info_.vendor.empty(); }
  virtual void run_vendor() { throw_error(info_.name, ": no vendor baseline"); }
  // Named views of the live output buffers.
  std::vector<std::pair<std::string, TensorView>> outputs() const override;
  virtual int64_t buffer_bytes() const;  // inputs plus outputs

  // Cache-cold mode: add_cold_copy draws a further copy of the inputs (and outputs) at `seed`;
  // use_cold_copy(i) makes copy i the live one. The default copies the owned buffers.
  virtual void add_cold_copy(uint64_t seed);
  virtual void use_cold_copy(size_t index);

  // The live inputs with their names, in order: what a kernel lab candidate receives (empty for
  // an op's problem registered without its inputs' names, suite_op_problem.h).
  virtual std::vector<std::pair<std::string, TensorView>> named_inputs() const;
  // The live buffers of a buffer-owning problem (empty for an op's problem).
  std::vector<Tensor>& inputs() { return inputs_; }
  const std::vector<Tensor>& inputs() const { return inputs_; }
  std::vector<Tensor>& output_tensors() { return outputs_; }
  const std::vector<Tensor>& output_tensors() const { return outputs_; }

 protected:
  SuiteInfo& mutable_info() { return info_; }  // for problems that describe their plan after construction
  size_t add_input(const std::string& name, const Shape& shape, DType dtype = DType::f32, double low = -1,
                   double high = 1);
  size_t add_output(const std::string& name, const Shape& shape, DType dtype = DType::f32);
  const TensorView& in(size_t index) const { return inputs_[index].view(); }
  const TensorView& out(size_t index) const { return outputs_[index].view(); }
  float* in_f32(size_t index) const { return inputs_[index].ptr<float>(); }
  float* out_f32(size_t index) const { return outputs_[index].ptr<float>(); }
  // Bytes of all inputs and outputs: the minimum traffic of most problems.
  double io_bytes() const;

 private:
  void allocate_inputs();  // fresh tensors from the specs
  void allocate_outputs();

  SuiteInfo info_;
  std::string shape_text_;
  std::vector<SuiteTensorSpec> input_specs_, output_specs_;
  std::vector<Tensor> inputs_, outputs_;
  std::vector<std::pair<std::vector<Tensor>, std::vector<Tensor>>> cold_copies_;  // (inputs, outputs)
};

// What a reference reads and writes: every input converted to T (integer inputs too; they are
// small), and one vector per output, sized to its element count.
template <class T>
struct ReferenceIO {
  std::vector<std::vector<T>> inputs;
  std::vector<std::vector<T>> outputs;
  const std::vector<T>& in(size_t index) const { return inputs[index]; }
  std::vector<T>& out(size_t index) { return outputs[index]; }
};

// The generic part of reference() for a buffer-owning problem: Derived supplies
//   template <class T> void compute_reference(ReferenceIO<T>& io) const;
template <class Derived>
class SuiteProblemWithReference : public SuiteProblem {
 public:
  using SuiteProblem::SuiteProblem;

  void reference(bool use_double, const std::vector<TensorView>& into) const override {
    use_double ? run_reference<double>(into) : run_reference<float>(into);
  }

 private:
  template <class T>
  void run_reference(const std::vector<TensorView>& into) const {
    ReferenceIO<T> io;
    for (const auto& input : inputs()) io.inputs.push_back(to_vector<T>(input.view()));
    for (const auto& output : output_tensors()) io.outputs.emplace_back(static_cast<size_t>(output.numel()), T(0));
    static_cast<const Derived&>(*this).template compute_reference<T>(io);
    for (size_t i = 0; i < into.size(); ++i) write_from_vector(into[i], io.outputs[i]);
  }
};

// A registered problem: builds it at full size or at the small --quick size.
struct SuiteEntry {
  std::string name;
  std::string family;
  std::function<std::unique_ptr<SuiteProblem>(bool quick)> make;
  // The same computation at a random awkward shape drawn from `seed` (the kernel lab's hidden
  // shapes); null where the problem has only its two sizes.
  std::function<std::unique_ptr<SuiteProblem>(uint64_t seed)> make_at_random_shape = nullptr;
};

// Every problem of the suite, in report order (LLM production ops first, then fusion problems).
const std::vector<SuiteEntry>& suite_entries();

}  // namespace lathe
