// A problem of the kernel benchmark suite (`lathe bench --suite`): one computation at one size,
// with a seeded input generator, a plain reference (loops, run in double as the oracle and in
// float as the naive same-precision baseline of the tolerance rule), lathe's path (an optimized op
// or a composition of ops and plain loops) and, where one exists, a vendor baseline (oneDNN or
// OpenBLAS in the same process). The judge (suite_judge.h) checks both paths on fresh inputs and
// times them; this file only describes the problem.
//
// Paths must read inputs() and outputs() on every call, never pointers cached at construction:
// the cache-cold mode swaps in rotated copies of the buffers between runs. Scratch buffers a path
// owns may be kept.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/bench/timing.h"
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

class SuiteProblem {
 public:
  SuiteProblem(SuiteInfo info, std::string shape_text);
  virtual ~SuiteProblem() = default;

  const SuiteInfo& info() const { return info_; }
  const std::string& shape_text() const { return shape_text_; }  // "tokens=512,d=1024" for reports
  const std::vector<SuiteTensorSpec>& input_specs() const { return input_specs_; }
  const std::vector<SuiteTensorSpec>& output_specs() const { return output_specs_; }

  // The live buffers; the judge replaces them with rotated copies in cache-cold mode.
  std::vector<Tensor>& inputs() { return inputs_; }
  std::vector<Tensor>& outputs() { return outputs_; }
  const std::vector<Tensor>& inputs() const { return inputs_; }
  const std::vector<Tensor>& outputs() const { return outputs_; }
  void allocate_inputs();  // fresh tensors from the specs
  void allocate_outputs();
  int64_t buffer_bytes() const;  // inputs plus outputs

  // Draws every input uniformly from its spec's range (stream = input index). Problems with
  // structured inputs (group sizes, page tables, targets) override it and call it first.
  virtual void fill_inputs(uint64_t seed);
  // Untimed, before every run: restores state a path updates in place (AdamW).
  virtual void prepare() {}
  virtual void run_lathe() = 0;
  virtual bool has_vendor() const { return !info_.vendor.empty(); }
  virtual void run_vendor() { throw_error(info_.name, ": no vendor baseline"); }
  // The reference in double (use_double) or float, from the current inputs, one vector per output
  // (row-major). The loops run max(1, timed_runs) times; with `seconds`, each run's time (the loops
  // alone, not the conversions) is appended to it.
  virtual std::vector<std::vector<double>> reference(bool use_double, int timed_runs = 0,
                                                     std::vector<double>* seconds = nullptr) const = 0;
  virtual OpCost cost() const = 0;
  virtual Tolerance tolerance() const { return {}; }

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
  SuiteInfo info_;
  std::string shape_text_;
  std::vector<SuiteTensorSpec> input_specs_, output_specs_;
  std::vector<Tensor> inputs_, outputs_;
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

// The generic part of reference(): Derived supplies
//   template <class T> void compute_reference(ReferenceIO<T>& io) const;
template <class Derived>
class SuiteProblemWithReference : public SuiteProblem {
 public:
  using SuiteProblem::SuiteProblem;

  std::vector<std::vector<double>> reference(bool use_double, int timed_runs = 0,
                                             std::vector<double>* seconds = nullptr) const override {
    return use_double ? run_reference<double>(timed_runs, seconds) : run_reference<float>(timed_runs, seconds);
  }

 private:
  template <class T>
  std::vector<std::vector<double>> run_reference(int timed_runs, std::vector<double>* seconds) const {
    ReferenceIO<T> io;
    for (const auto& input : inputs()) io.inputs.push_back(to_vector<T>(input.view()));
    for (const auto& spec : output_specs()) io.outputs.emplace_back(static_cast<size_t>(spec.shape.numel()), T(0));
    const Derived& derived = static_cast<const Derived&>(*this);
    for (int run = 0; run < std::max(1, timed_runs); ++run) {
      double start = now_seconds();
      derived.template compute_reference<T>(io);
      if (seconds) seconds->push_back(now_seconds() - start);
    }
    std::vector<std::vector<double>> results;
    for (const auto& output : io.outputs) results.emplace_back(output.begin(), output.end());
    return results;
  }
};

// A registered problem: builds it at full size or at the small --quick size.
struct SuiteEntry {
  std::string name;
  std::string family;
  std::function<std::unique_ptr<SuiteProblem>(bool quick)> make;
};

// Every problem of the suite, in report order (LLM production ops first, then fusion problems).
const std::vector<SuiteEntry>& suite_entries();

}  // namespace lathe
