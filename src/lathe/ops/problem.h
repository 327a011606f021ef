// Problems: computations with seeded random inputs at one shape, checked against a float64
// reference. One framework for every tool that treats computations alike: the generic op tests,
// the autotuner, `lathe bench`, `lathe ops` and the kernel suite (bench/suite). A Problem names
// its outputs, computes them with its reference (in double: the oracle; in float: the naive
// baseline), states its tolerance and cost. An OpProblem is a Problem of one registered op: it
// also runs any implementation with any config. The suite's problems are Problems too: those of
// an op are that op's OpProblem (bench/suite/suite_op_problem.h); the others (fusions, MoE,
// recurrences) are compositions. Outputs are checked with the tolerance rule of the guide:
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
  double absolute = 1e-6;       // times max(1, max |reference|)
  double relative_norm = 1e-5;  // float32 outputs only; 0 disables
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

// What every problem provides, whoever runs it (op tests, tuner, op bench, kernel suite).
class Problem {
 public:
  virtual ~Problem() = default;
  virtual OpCost cost() const = 0;
  // The tensors a run writes, with names for reports.
  virtual std::vector<std::pair<std::string, TensorView>> outputs() const = 0;
  // Runs the reference computing in double (use_double) or in float (the naive same-precision
  // baseline), writing into `into` (shaped like outputs(), any dtype), from the pristine inputs.
  virtual void reference(bool use_double, const std::vector<TensorView>& into) const = 0;
  // The comparison rule for one of outputs() (by its name): most problems have one for all.
  virtual Tolerance tolerance(const std::string& output) const {
    (void)output;
    return {};
  }
  // Restores inputs that a run updates in place (optimizer state, accumulators).
  virtual void prepare_run() {}
};

// A problem's outputs as its reference computes them: exact (f64) and naive (the outputs' own
// dtypes, computed in float), each shaped like problem.outputs().
struct ReferenceOutputs {
  std::vector<Tensor> exact, naive;
  double naive_seconds = 0;  // wall time of the naive reference (the suite's "plain loops" time)
};
ReferenceOutputs compute_reference_outputs(Problem& problem);  // calls prepare_run() before each
// Poisons the outputs (NaN), calls prepare_run(), then run(), and compares every output with the
// references by the tolerance rule.
CheckResult check_run(Problem& problem, const ReferenceOutputs& references, const std::function<void()>& run);

class OpProblem : public Problem {
 public:
  virtual const std::string& op_name() const = 0;
  virtual std::string shape_key() const = 0;                // the tuning-cache key of these args
  virtual std::vector<std::string> impl_names() const = 0;  // usable here, best first
  // Registered implementations this CPU cannot run ("avx512 (needs avx512)"): what tests skip here.
  virtual std::vector<std::string> impls_missing_isa() const = 0;
  virtual ConfigParams heuristic_config(const std::string& impl) const = 0;
  virtual std::vector<ConfigParams> config_space(const std::string& impl) const = 0;
  // Runs an implementation with a config (the public entry point, with full dispatch, when impl
  // is empty and config is null).
  virtual void run(const std::string& impl, const ConfigParams* config) = 0;
  // What the public entry point would pick: "avx512 (tuned) block_q=64,block_k=128".
  virtual std::string describe_dispatch() const = 0;
  // Poisons outputs, runs, compares with the reference.
  virtual CheckResult check(const std::string& impl, const ConfigParams* config) = 0;
  // Runs twice (poisoned in between) and reports whether all outputs are bitwise identical.
  virtual bool deterministic(const std::string& impl, const ConfigParams* config) = 0;
  // Other libraries that compute the same thing in this process (e.g. "onednn", "openblas"),
  // for benchmark rows measured in the same run. run_peer computes into the same outputs.
  virtual std::vector<std::string> peers() const { return {}; }
  virtual void run_peer(const std::string& peer) { throw_error(op_name(), ": no peer named '", peer, "'"); }
  // Which of its kernels a peer runs for this problem, where it says ("brg:avx512_core_amx_bf16"
  // for oneDNN's bf16 matmul); empty otherwise.
  virtual std::string peer_detail(const std::string& peer) const {
    (void)peer;
    return "";
  }
  // Bytes of the tensors the problem holds (inputs and outputs): sizes the suite's cache-cold copies.
  virtual int64_t buffer_bytes() const = 0;
};

struct NamedShape {
  std::string label;  // the real model and layer it comes from
  std::string shape;  // ShapeSpec text
};

struct OpRegistration {
  std::string name;                     // "rms_norm", "rms_norm_backward"
  std::string summary;                  // one line
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

// A device copy of a host view keeping its strides (a view into a wider buffer stays one: the copy
// spans the view's first to last element), with the host bytes it was made from; and the copy back,
// which writes only the elements the run changed (device bytes differ from `before`). So mirrors
// of overlapping views (the two halves of a fused tensor) each bring back their own writes and
// never a stale copy of the other's: what TypedProblem::run_on_device mirrors (ops/problem.cc).
struct DeviceMirror {
  Tensor device;
  std::vector<uint8_t> before;
};
DeviceMirror mirror_to_device(const TensorView& host);
void copy_from_device(const TensorView& host, const DeviceMirror& mirror);

// Compares one fast output with the float64 and naive references by the rule above.
OutputCheck compare_output(const std::string& name, const TensorView& fast, const TensorView& reference64,
                           const TensorView& naive, const Tolerance& tolerance);

// A random integer in [low, high] derived from (seed, stream): for random test shapes.
int64_t random_extent(uint64_t seed, uint64_t stream, int64_t low, int64_t high);

// The generic part of an OpProblem for an Op<Args, Config>. An op's problem derives from it,
// allocates inputs and outputs in its constructor (own() keeps them alive), sets args_, and
// provides outputs() and reference(). args() lets a composition outside the op (a suite vendor
// baseline) read the same inputs and write the same outputs.
template <class Args, class Config>
class TypedProblem : public OpProblem {
 public:
  using Entry = std::function<void(const Args&, const Dispatch&)>;

  TypedProblem(const Op<Args, Config>& op, Entry entry) : op_(op), entry_(std::move(entry)) {}

  const std::string& op_name() const override { return op_.name(); }
  std::string shape_key() const override { return op_.shape_key(args_); }
  const Args& args() const { return args_; }

  int64_t buffer_bytes() const override {
    int64_t bytes = 0;
    for (const auto& tensor : owned_) bytes += tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
    return bytes;
  }

  // Host implementations first (as dispatch orders them), then device ones where a GPU is usable:
  // a problem's tensors live on the host and are mirrored onto the device for a device run.
  std::vector<std::string> impl_names() const override {
    std::vector<std::string> names;
    for (const auto* impl : op_.usable_impls(args_)) names.push_back(impl->name);
    for (const auto& impl : op_.impls())
      if (impl.device != Device::cpu && impl.runnable_here(args_)) names.push_back(impl.name);
    return names;
  }

  std::vector<std::string> impls_missing_isa() const override {
    std::vector<std::string> missing;
    for (const auto& impl : op_.impls()) {
      if (impl.device != Device::cpu) {
        if (!cuda::available())
          missing.push_back(str_cat(impl.name, " (", cuda::status_line(),
                                    impl.composite ? "; its own logic checked under the host simulation)" : ")"));
      } else if (!isa_available(impl.isa)) {
        missing.push_back(str_cat(impl.name, " (needs ", isa_name(impl.isa), ")"));
      }
    }
    return missing;
  }

  ConfigParams heuristic_config(const std::string& impl) const override {
    return config_to_params(problem_impl(impl).heuristic(args_));
  }

  std::vector<ConfigParams> config_space(const std::string& impl) const override {
    std::vector<ConfigParams> space;
    for (const Config& config : problem_impl(impl).space(args_)) space.push_back(config_to_params(config));
    return space;
  }

  std::string describe_dispatch() const override {
    const auto& impl = op_.select_impl(args_);
    ConfigSource source = ConfigSource::heuristic;
    auto config = config_to_params(op_.select_config(impl, args_, Dispatch{}, &source));
    return str_cat(impl.name, " (", config_source_name(source), ") ", config.to_string());
  }

  void run(const std::string& impl, const ConfigParams* config) override {
    if constexpr (VisitsTensors<Args>) {
      if (!impl.empty() && problem_impl(impl).device != Device::cpu) {
        run_on_device(impl, config);
        return;
      }
    }
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
    if (!references_) references_ = compute_reference_outputs(*this);
    return check_run(*this, *references_, [&] { run(impl, config); });
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
        if (attempt == 0)
          first.push_back(std::move(bytes));
        else if (bytes != first[index])
          return false;
        ++index;
      }
    }
    return true;
  }

 protected:
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
  // The named implementation, wherever it runs (a device one is looked up by name: the problem's
  // host args are mirrored before it runs); "" is what dispatch picks.
  const typename Op<Args, Config>::ImplType& problem_impl(const std::string& name) const {
    for (const auto& impl : op_.impls())
      if (!name.empty() && impl.name == name && impl.device != Device::cpu) {
        LATHE_CHECK(impl.runnable_here(args_), op_.name(), ": implementation '", name,
                    "' is not usable here: ", cuda::available() ? "unsupported arguments" : cuda::unavailable_reason());
        return impl;
      }
    return op_.select_impl(args_, name);
  }

  // Copies every tensor of the args to the device, runs the implementation there through the
  // public entry (full validation), and copies every tensor back: outputs, and inputs an op
  // updates in place, end up on the host as a host run leaves them.
  void run_on_device(const std::string& impl, const ConfigParams* config) {
    Args device_args = args_;
    std::vector<DeviceMirror> mirrors;
    std::vector<TensorView> originals;
    device_args.visit_tensors([&](TensorView& view) {
      if (view.data == nullptr) return;
      originals.push_back(view);
      mirrors.push_back(mirror_to_device(view));
      view = mirrors.back().device.view();
    });
    Dispatch dispatch;
    dispatch.impl = impl;
    dispatch.config = config;
    entry_(device_args, dispatch);
    for (size_t index = 0; index < mirrors.size(); ++index) copy_from_device(originals[index], mirrors[index]);
  }

  static std::vector<uint8_t> raw_bytes(const TensorView& view) {
    std::vector<double> values = to_vector<double>(view);
    std::vector<uint8_t> bytes(values.size() * sizeof(double));
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());  // an empty output: no copy
    return bytes;
  }

  std::vector<Tensor> owned_;
  std::optional<ReferenceOutputs> references_;  // computed on the first check
  uint64_t next_stream_ = 1;
};

}  // namespace lathe
