// Ops as concrete problems, for the tools that treat every op alike: the generic op tests, the
// autotuner, `lathe bench` and `lathe ops`. An OpProblem owns seeded random inputs at one shape,
// runs any implementation with any config, and checks outputs against the float64 reference with
// the tolerance rule of the guide:
//   error(fast, f64 reference) <= 2 * error(naive same-precision reference, f64 reference)
//                                 + absolute * max(1, max |reference|)
// and, for float32 outputs, ||fast - ref|| / ||ref|| <= max(relative_norm, 2 * naive's)
//                           + absolute * max(1, max |reference|) * sqrt(count) / ||ref||.
// NaN never passes; outputs are NaN-poisoned before every checked run.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/core/rng.h"
#include "lathe/core/tensor.h"
#include "lathe/ops/op.h"

namespace lathe {

// "m=1024,n=1024,k=1024,dtype=bf16": the shape language of the CLI, the tuning cache and tests.
class ShapeSpec {
 public:
  static ShapeSpec parse(const std::string& text);  // throws lathe::Error on malformed text
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  std::string get(const std::string& key, const std::string& fallback) const;
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  // Throws naming the op and the unknown key if the spec has a key not in `known`.
  void check_known(const std::string& op, const std::vector<std::string>& known) const;
  const std::string& text() const { return text_; }

 private:
  std::map<std::string, std::string> values_;
  std::string text_;
};

struct Tolerance {
  double naive_factor = 2.0;
  double absolute = 1e-6;        // times max(1, max |reference|)
  double relative_norm = 1e-5;   // float32 outputs only; 0 disables
};

struct OutputCheck {
  std::string name;
  double max_error = 0, naive_error = 0, allowed = 0, relative_norm = 0, allowed_relative_norm = 0;
  int64_t nan_count = 0, worst_index = -1;
  bool passed = false;
};

struct CheckResult {
  bool passed = true;
  std::vector<OutputCheck> outputs;
  std::string summary() const;  // one line per output
};

class OpProblem {
 public:
  virtual ~OpProblem() = default;
  virtual const std::string& op_name() const = 0;
  virtual std::string shape_key() const = 0;   // the tuning-cache key of these args
  virtual OpCost cost() const = 0;
  virtual std::vector<std::string> impl_names() const = 0;  // usable here, best first
  virtual ConfigParams heuristic_config(const std::string& impl) const = 0;
  virtual std::vector<ConfigParams> config_space(const std::string& impl) const = 0;
  // Runs an implementation with a config (the public entry point, with full dispatch, when impl
  // is empty and config is null).
  virtual void run(const std::string& impl, const ConfigParams* config) = 0;
  // What the public entry point would pick: "avx512 (tuned) block_q=64,block_k=128".
  virtual std::string describe_dispatch() const = 0;
  // Restores inputs that an op updates in place (optimizer state, accumulators).
  virtual void prepare_run() {}
  // Poisons outputs, runs, compares with the reference.
  virtual CheckResult check(const std::string& impl, const ConfigParams* config) = 0;
  // Runs twice (poisoned in between) and reports whether all outputs are bitwise identical.
  virtual bool deterministic(const std::string& impl, const ConfigParams* config) = 0;
  // Other libraries that compute the same thing in this process (e.g. "onednn", "openblas"),
  // for benchmark rows measured in the same run. run_peer computes into the same outputs.
  virtual std::vector<std::string> peers() const { return {}; }
  virtual void run_peer(const std::string& peer) { throw_error(op_name(), ": no peer named '", peer, "'"); }
};

struct NamedShape {
  std::string label;  // the real model and layer it comes from
  std::string shape;  // ShapeSpec text
};

struct OpRegistration {
  std::string name;        // "rms_norm", "rms_norm_backward"
  std::string summary;     // one line
  std::vector<std::string> shape_keys;  // accepted ShapeSpec keys, documented by `lathe ops`
  std::string example_shape;
  std::vector<NamedShape> bench_shapes;  // real-model shapes for `lathe bench`
  std::vector<std::string> edge_shapes;  // awkward fixed shapes always tested (0, 1, odd sizes)
  // A random awkward shape for tests, small enough for the float64 reference.
  std::function<std::string(uint64_t seed)> random_shape;
  std::function<std::unique_ptr<OpProblem>(const ShapeSpec&, uint64_t seed)> make_problem;
};

// Every registered op, in registration order (see ops/all_ops.cc).
const std::vector<OpRegistration>& all_ops();
const OpRegistration& find_op(const std::string& name);  // throws naming the known ops

// Compares one fast output with the float64 and naive references by the rule above.
OutputCheck compare_output(const std::string& name, const TensorView& fast, const TensorView& reference64,
                           const TensorView& naive, const Tolerance& tolerance);

// A random integer in [low, high] derived from (seed, stream): for random test shapes.
int64_t random_extent(uint64_t seed, uint64_t stream, int64_t low, int64_t high);

// The generic part of an OpProblem for an Op<Args, Config>. An op's problem derives from it,
// allocates inputs and outputs in its constructor (own() keeps them alive), sets args_, and
// provides outputs() and reference().
template <class Args, class Config>
class TypedProblem : public OpProblem {
 public:
  using Entry = std::function<void(const Args&, const Dispatch&)>;

  TypedProblem(const Op<Args, Config>& op, Entry entry) : op_(op), entry_(std::move(entry)) {}

  const std::string& op_name() const override { return op_.name(); }
  std::string shape_key() const override { return op_.shape_key(args_); }

  std::vector<std::string> impl_names() const override {
    std::vector<std::string> names;
    for (const auto* impl : op_.usable_impls(args_)) names.push_back(impl->name);
    return names;
  }

  ConfigParams heuristic_config(const std::string& impl) const override {
    return config_to_params(op_.select_impl(args_, impl).heuristic(args_));
  }

  std::vector<ConfigParams> config_space(const std::string& impl) const override {
    std::vector<ConfigParams> space;
    for (const Config& config : op_.select_impl(args_, impl).space(args_)) space.push_back(config_to_params(config));
    return space;
  }

  std::string describe_dispatch() const override {
    const auto& impl = op_.select_impl(args_);
    ConfigSource source = ConfigSource::heuristic;
    auto config = config_to_params(op_.select_config(impl, args_, Dispatch{}, &source));
    return str_cat(impl.name, " (", config_source_name(source), ") ", config.to_string());
  }

  void run(const std::string& impl, const ConfigParams* config) override {
    if (impl.empty() && config == nullptr) {
      entry_(args_, Dispatch{});
      return;
    }
    Dispatch dispatch;
    dispatch.impl = impl;
    dispatch.config = config;
    entry_(args_, dispatch);
  }

  CheckResult check(const std::string& impl, const ConfigParams* config) override {
    compute_references();
    for (const auto& output : outputs()) poison(output.second);
    prepare_run();  // after poisoning: outputs updated in place are also inputs
    run(impl, config);
    CheckResult result;
    auto fast = outputs();
    for (size_t i = 0; i < fast.size(); ++i) {
      result.outputs.push_back(
          compare_output(fast[i].first, fast[i].second, reference64_[i], reference_naive_[i], tolerance()));
      result.passed = result.passed && result.outputs.back().passed;
    }
    return result;
  }

  bool deterministic(const std::string& impl, const ConfigParams* config) override {
    std::vector<std::vector<uint8_t>> first;
    for (int attempt = 0; attempt < 2; ++attempt) {
      for (const auto& output : outputs()) poison(output.second);
      prepare_run();
      run(impl, config);
      size_t index = 0;
      for (const auto& output : outputs()) {
        std::vector<uint8_t> bytes = raw_bytes(output.second);
        if (attempt == 0) first.push_back(std::move(bytes));
        else if (bytes != first[index]) return false;
        ++index;
      }
    }
    return true;
  }

 protected:
  // The tensors the op writes, with names for reports.
  virtual std::vector<std::pair<std::string, TensorView>> outputs() const = 0;
  // Runs the reference computing in double (use_double) or in float (the naive same-precision
  // baseline), writing into `into` (shaped like outputs(), any dtype), from the pristine inputs.
  virtual void reference(bool use_double, const std::vector<TensorView>& into) const = 0;
  virtual Tolerance tolerance() const { return {}; }

  // Keeps a tensor alive for the problem's lifetime and returns its view.
  TensorView own(Tensor tensor) {
    owned_.push_back(std::move(tensor));
    return owned_.back().view();
  }
  TensorView random_tensor(const Shape& shape, DType dtype, uint64_t seed, double low = -1, double high = 1) {
    TensorView view = own(Tensor::empty(shape, dtype));
    fill_uniform(view, seed, low, high, next_stream_++);
    return view;
  }
  TensorView output_tensor(const Shape& shape, DType dtype) { return own(Tensor::empty(shape, dtype)); }

  const Op<Args, Config>& op_;
  Entry entry_;
  Args args_{};

 private:
  void compute_references() {
    if (!reference64_.empty() || outputs().empty()) return;
    std::vector<TensorView> into64, into_naive;
    for (const auto& output : outputs()) {
      Tensor exact = Tensor::empty(output.second.shape, DType::f64);
      Tensor naive = Tensor::empty(output.second.shape, output.second.dtype);
      reference_storage_.push_back(exact);
      reference_storage_.push_back(naive);
      into64.push_back(exact.view());
      into_naive.push_back(naive.view());
    }
    prepare_run();
    reference(true, into64);
    prepare_run();
    reference(false, into_naive);
    reference64_ = into64;
    reference_naive_ = into_naive;
  }

  static std::vector<uint8_t> raw_bytes(const TensorView& view) {
    std::vector<double> values = to_vector<double>(view);
    std::vector<uint8_t> bytes(values.size() * sizeof(double));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }

  std::vector<Tensor> owned_;
  std::vector<Tensor> reference_storage_;
  std::vector<TensorView> reference64_, reference_naive_;
  uint64_t next_stream_ = 1;
};

}  // namespace lathe
