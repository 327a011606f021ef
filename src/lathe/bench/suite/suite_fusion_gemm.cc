// Fusion problems in the style of KernelBench level 2: y = x @ w^T + bias (an nn.Linear), then a
// chain of two to five elementwise or row-reduction ops. Definitions are ours; shapes are those of
// transformer layers (GPT-2 small 768/3072, BERT-base 768, Llama-like 1024-4096) at CPU-sized token
// counts.
//   lathe: the matmul op with bias and the first activation fused when it is relu / gelu_tanh /
//          silu, lathe's softmax / layer_norm / rms_norm ops for full-row normalisations, and plain
//          row loops (parallel over rows) for every other step.
//   vendor: a oneDNN matmul primitive with bias and the longest prefix of the chain expressible as
//          post-ops (eltwise, per-column and full-matrix binary add / multiply), then the same
//          plain row loops for what remains.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "lathe/bench/lab/lab_task.h"
#include "lathe/bench/suite/found/found_kernel_registry.h"
#include "lathe/bench/suite/suite_fusion_definitions.h"
#include "lathe/bench/suite/suite_problem.h"
#include "lathe/bench/suite/suite_reference.h"
#include "lathe/bench/suite/suite_vendor.h"
#include "lathe/core/parallel.h"
#include "lathe/ops/layer_norm/layer_norm.h"
#include "lathe/ops/matmul/matmul.h"
#include "lathe/ops/rms_norm/rms_norm.h"
#include "lathe/ops/softmax/softmax.h"

namespace lathe {
namespace {

using namespace suite_fusion;  // Step, FusionStep, FusionDefinition, fusion_definitions()

double step_flops_per_element(Step step) {
  switch (step) {
    case Step::gelu_tanh:
    case Step::gelu_erf:
    case Step::silu:
    case Step::mish:
    case Step::tanh:
    case Step::sigmoid:
    case Step::softplus:
    case Step::softmax:
    case Step::logsumexp:
      return 8;
    case Step::layer_norm:
    case Step::group_norm:
    case Step::rms_norm:
      return 6;
    default:
      return 1;
  }
}

// Applies one step to a row of `width` values (width becomes 1 for reductions). extra[0..1] are the
// step's inputs: vectors of n, or the (m, n) matrix whose row `row` is used.
template <class T>
void apply_step(const FusionStep& s, T* y, int64_t& width, const T* const* extra, int64_t row) {
  namespace ref = suite_reference;
  const T a = static_cast<T>(s.a), b = static_cast<T>(s.b);
  int64_t n = width;
  switch (s.step) {
    case Step::scale:
      for (int64_t j = 0; j < n; ++j) y[j] *= a;
      break;
    case Step::add_constant:
      for (int64_t j = 0; j < n; ++j) y[j] += a;
      break;
    case Step::add_row:
      for (int64_t j = 0; j < n; ++j) y[j] += extra[0][j];
      break;
    case Step::multiply_row:
      for (int64_t j = 0; j < n; ++j) y[j] *= extra[0][j];
      break;
    case Step::add_matrix:
      for (int64_t j = 0; j < n; ++j) y[j] += extra[0][row * n + j];
      break;
    case Step::multiply_matrix:
      for (int64_t j = 0; j < n; ++j) y[j] *= extra[0][row * n + j];
      break;
    case Step::relu:
      for (int64_t j = 0; j < n; ++j) y[j] = std::max(y[j], T(0));
      break;
    case Step::leaky_relu:
      for (int64_t j = 0; j < n; ++j) y[j] = y[j] >= 0 ? y[j] : a * y[j];
      break;
    case Step::gelu_tanh:
      for (int64_t j = 0; j < n; ++j) y[j] = ref::gelu_tanh(y[j]);
      break;
    case Step::gelu_erf:
      for (int64_t j = 0; j < n; ++j) y[j] = ref::gelu_erf(y[j]);
      break;
    case Step::silu:
      for (int64_t j = 0; j < n; ++j) y[j] = ref::silu(y[j]);
      break;
    case Step::mish:
      for (int64_t j = 0; j < n; ++j) y[j] = ref::mish(y[j]);
      break;
    case Step::tanh:
      for (int64_t j = 0; j < n; ++j) y[j] = std::tanh(y[j]);
      break;
    case Step::sigmoid:
      for (int64_t j = 0; j < n; ++j) y[j] = ref::sigmoid(y[j]);
      break;
    case Step::hardswish:
      for (int64_t j = 0; j < n; ++j) y[j] = ref::hardswish(y[j]);
      break;
    case Step::softplus:
      for (int64_t j = 0; j < n; ++j) y[j] = ref::softplus(y[j]);
      break;
    case Step::hardtanh:
      for (int64_t j = 0; j < n; ++j) y[j] = std::clamp(y[j], a, b);
      break;
    // Full-row normalisations: the ops' own references on the row (in place), as (1, n) tensors.
    case Step::softmax: {
      SoftmaxArgs args;
      args.x = args.y = ref::view_of(y, {1, n});
      softmax_reference<T>(args);
      break;
    }
    case Step::layer_norm:
    case Step::group_norm: {  // group norm: a layer norm over each group, with its slice of the weights
      int64_t groups = s.step == Step::group_norm ? static_cast<int64_t>(s.a) : 1, size = n / groups;
      for (int64_t g = 0; g < groups; ++g) {
        LayerNormArgs args;
        args.x = args.y = ref::view_of(y + g * size, {1, size});
        args.weight = ref::view_of(extra[0] + g * size, {size});
        args.bias = ref::view_of(extra[1] + g * size, {size});
        args.eps = 1e-5f;
        layer_norm_reference<T>(args);
      }
      break;
    }
    case Step::rms_norm: {
      RmsNormArgs args;
      args.x = args.y = ref::view_of(y, {1, n});
      args.weight = ref::view_of(extra[0], {n});
      args.eps = 1e-6f;
      rms_norm_reference<T>(args);
      break;
    }
    case Step::logsumexp: {
      T max_value = *std::max_element(y, y + n), total = 0;
      for (int64_t j = 0; j < n; ++j) total += std::exp(y[j] - max_value);
      y[0] = max_value + std::log(total);
      width = 1;
      break;
    }
    case Step::row_mean:
    case Step::row_sum: {
      T total = 0;
      for (int64_t j = 0; j < n; ++j) total += y[j];
      y[0] = s.step == Step::row_mean ? total / static_cast<T>(n) : total;
      width = 1;
      break;
    }
    case Step::row_max:
      y[0] = *std::max_element(y, y + n), width = 1;
      break;
  }
}

// Runs steps [first, end) over every row of `from` (m, n) into `to` (m, final width); to may be from.
template <class T>
void apply_steps(const std::vector<FusionStep>& steps, size_t first, size_t end,
                 const std::vector<std::vector<const T*>>& extras, const T* from, T* to, int64_t m, int64_t n,
                 int64_t* final_width = nullptr) {
  int64_t out_width = n;
  for (size_t s = first; s < end; ++s)
    if (fusion_step_reduces_row(steps[s].step)) out_width = 1;
  parallel_for(m, 1, [&](int64_t begin, int64_t stop) {
    std::vector<T> row(static_cast<size_t>(n));
    for (int64_t i = begin; i < stop; ++i) {
      std::copy(from + i * n, from + (i + 1) * n, row.begin());
      int64_t width = n;
      for (size_t s = first; s < end; ++s) apply_step(steps[s], row.data(), width, extras[s].data(), i);
      std::copy(row.begin(), row.begin() + width, to + i * out_width);
    }
  });
  if (final_width) *final_width = out_width;
}

std::string describe_steps(const std::vector<FusionStep>& steps);

class FusionProblem : public SuiteProblemWithReference<FusionProblem> {
 public:
  FusionProblem(const FusionDefinition& definition, int64_t m, int64_t n, int64_t k)
      : SuiteProblemWithReference(SuiteInfo{definition.name, "fusion", definition.summary, definition.model, "", ""},
                                  str_cat("m=", m, ",n=", n, ",k=", k)),
        steps_(definition.steps) {
    m_ = m;
    n_ = n;
    k_ = k;
    double bound = 1.0 / std::sqrt(static_cast<double>(k_));  // nn.Linear's initialisation range
    add_input("x", {m_, k_});
    add_input("w", {n_, k_}, DType::f32, -bound, bound);
    add_input("bias", {n_}, DType::f32, -bound, bound);
    int64_t width = n_;
    for (const auto& step : steps_) {
      std::vector<size_t> indices;
      switch (step.step) {
        case Step::add_row:
          indices.push_back(add_input("bias2", {n_}, DType::f32, -0.5, 0.5));
          break;
        case Step::multiply_row:
          indices.push_back(add_input("channel_scale", {n_}, DType::f32, 0.5, 1.5));
          break;
        case Step::add_matrix:
          indices.push_back(add_input("residual", {m_, n_}));
          break;
        case Step::multiply_matrix:
          indices.push_back(add_input("gate", {m_, n_}, DType::f32, 0, 1));
          break;
        case Step::rms_norm:
          indices.push_back(add_input("norm_weight", {n_}, DType::f32, 0.5, 1.5));
          break;
        case Step::layer_norm:
        case Step::group_norm:
          indices.push_back(add_input("norm_weight", {n_}, DType::f32, 0.5, 1.5));
          indices.push_back(add_input("norm_bias", {n_}, DType::f32, -0.5, 0.5));
          break;
        default:
          break;
      }
      LATHE_ASSERT(static_cast<int>(indices.size()) == fusion_step_inputs(step.step));
      LATHE_ASSERT(width == n_ || (fusion_step_inputs(step.step) == 0 && step.step != Step::softmax));
      if (step.step == Step::group_norm) LATHE_ASSERT(n_ % static_cast<int64_t>(step.a) == 0);
      if (fusion_step_reduces_row(step.step)) width = 1;
      extra_inputs_.push_back(indices);
    }
    width_ = width;
    add_output("y", {m_, width_});
    scratch_ = Tensor::empty({m_, n_}, DType::f32);
    scratch_other_ = Tensor::empty({m_, n_}, DType::f32);
    plan_lathe();
    found_kernel_ = find_found_kernel(definition.name);
    if (found_kernel_) lathe_path_ = "found kernel (lathe optimize --emit)";
    plan_vendor();
    SuiteInfo& info = mutable_info();
    info.summary = str_cat(definition.summary, ": ", describe_steps(steps_));
    info.lathe_path = lathe_path_;
    info.vendor = vendor_path_;
  }

  // A chain with a row normalisation divides each output by its row's (or group's) spread, which
  // amplifies the GEMM's rounding wherever the spread is small. Two float paths (the plain loops,
  // a blocked FMA GEMM with vector math) then draw independent error fields of the same size, and
  // the ratio of their maxima has a tail: the found kernels of the group-norm chains at random
  // awkward shapes exceeded twice the plain path's worst error in about 1 check in 20 (ratios up
  // to 3.3x, every one within the relative-norm rule by 10x). Four times, for those chains only.
  Tolerance tolerance(const std::string&) const override {
    Tolerance tolerance;
    for (const auto& step : steps_)
      if (step.step == Step::layer_norm || step.step == Step::group_norm || step.step == Step::rms_norm)
        tolerance.naive_factor = 4.0;
    return tolerance;
  }

  OpCost cost() const override {
    double elements = static_cast<double>(m_ * n_);
    double flops = 2.0 * m_ * n_ * k_ + elements;
    for (const auto& step : steps_) flops += elements * step_flops_per_element(step.step);
    return {flops, io_bytes()};
  }

  void run_lathe() override {
    if (found_kernel_) {
      run_found_kernel();
      return;
    }
    MatmulArgs args;
    args.a = in(0);
    args.b = in(1);
    args.bias = in(2);
    args.trans_b = true;
    args.activation = fused_activation_;
    const TensorView* target = lathe_segments_.empty() ? &out(0) : &scratch_.view();
    args.c = *target;
    matmul(args);
    const float* current = scratch_.ptr<float>();
    float* other = scratch_other_.ptr<float>();
    auto extras = extra_pointers();
    for (size_t s = 0; s < lathe_segments_.size(); ++s) {
      auto [first, end] = lathe_segments_[s];
      bool last = s + 1 == lathe_segments_.size();
      if (end == first + 1 && uses_lathe_op(steps_[first].step)) {
        float* destination = last ? out_f32(0) : other;
        run_row_op(first, current, destination);
        if (!last) other = const_cast<float*>(current), current = destination;
      } else {
        float* destination = last ? out_f32(0) : const_cast<float*>(current);
        apply_steps<float>(steps_, first, end, extras, current, destination, m_, n_);
      }
    }
  }

  void run_vendor() override {
    if (!vendor_matmul_) vendor_matmul_ = std::make_unique<OnednnFusedMatmul>(m_, n_, k_, true, true, vendor_post_ops_);
    auto extras = extra_pointers();
    std::vector<const float*> binary;
    for (size_t s = 0; s < vendor_prefix_; ++s)
      if (!extras[s].empty()) binary.push_back(extras[s][0]);
    bool done = vendor_prefix_ == steps_.size();
    float* target = done ? out_f32(0) : scratch_.ptr<float>();
    vendor_matmul_->run(in_f32(0), in_f32(1), in_f32(2), target, binary);
    if (!done) apply_steps<float>(steps_, vendor_prefix_, steps_.size(), extras, target, out_f32(0), m_, n_);
  }

  template <class T>
  void compute_reference(ReferenceIO<T>& io) const {
    std::vector<T>& y = io.out(0);
    std::vector<T> full(static_cast<size_t>(m_ * n_));
    suite_reference::matmul(io.in(0).data(), io.in(1).data(), full.data(), m_, n_, k_, true);
    const std::vector<T>& bias = io.in(2);
    for (int64_t i = 0; i < m_; ++i)
      for (int64_t j = 0; j < n_; ++j) full[i * n_ + j] += bias[j];
    std::vector<std::vector<const T*>> extras;
    for (const auto& indices : extra_inputs_) {
      extras.emplace_back();
      for (size_t index : indices) extras.back().push_back(io.in(index).data());
    }
    apply_steps<T>(steps_, 0, steps_.size(), extras, full.data(), y.data(), m_, n_);
  }

 private:
  static bool uses_lathe_op(Step step) {
    return step == Step::softmax || step == Step::layer_norm || step == Step::rms_norm;
  }

  // Lathe: fuse the first activation into the matmul when it can, then split the rest into runs of
  // row-loop steps and single lathe-op steps.
  void plan_lathe() {
    size_t first = 0;
    if (!steps_.empty()) {
      Step step = steps_[0].step;
      if (step == Step::relu) fused_activation_ = Activation::relu;
      if (step == Step::gelu_tanh) fused_activation_ = Activation::gelu_tanh;
      if (step == Step::silu) fused_activation_ = Activation::silu;
      if (fused_activation_ != Activation::none) first = 1;
    }
    lathe_path_ =
        str_cat("matmul(bias",
                fused_activation_ != Activation::none ? str_cat(", ", activation_name(fused_activation_)) : "", ")");
    size_t start = first;
    for (size_t s = first; s <= steps_.size(); ++s) {
      bool boundary = s == steps_.size() || uses_lathe_op(steps_[s].step);
      if (boundary && s > start) {
        lathe_segments_.push_back({start, s});
        lathe_path_ += " + row loops";
      }
      if (s < steps_.size() && uses_lathe_op(steps_[s].step)) {
        lathe_segments_.push_back({s, s + 1});
        lathe_path_ += str_cat(" + ", steps_[s].step == Step::softmax      ? "softmax"
                                      : steps_[s].step == Step::layer_norm ? "layer_norm"
                                                                           : "rms_norm");
        start = s + 1;
      }
    }
  }

  void plan_vendor() {
    if (!onednn_available()) return;
    using Kind = OnednnPostOp::Kind;
    for (const auto& s : steps_) {
      OnednnPostOp op;
      float a = static_cast<float>(s.a), b = static_cast<float>(s.b);
      switch (s.step) {
        case Step::scale:
          op = {Kind::eltwise, "linear", a, 0};
          break;
        case Step::add_constant:
          op = {Kind::eltwise, "linear", 1, a};
          break;
        case Step::add_row:
          op = {Kind::add_row, ""};
          break;
        case Step::multiply_row:
          op = {Kind::multiply_row, ""};
          break;
        case Step::add_matrix:
          op = {Kind::add_matrix, ""};
          break;
        case Step::multiply_matrix:
          op = {Kind::multiply_matrix, ""};
          break;
        case Step::relu:
          op = {Kind::eltwise, "relu", 0, 0};
          break;
        case Step::leaky_relu:
          op = {Kind::eltwise, "relu", a, 0};
          break;
        case Step::gelu_tanh:
          op = {Kind::eltwise, "gelu_tanh"};
          break;
        case Step::gelu_erf:
          op = {Kind::eltwise, "gelu_erf"};
          break;
        case Step::silu:
          op = {Kind::eltwise, "swish", 1, 0};
          break;
        case Step::mish:
          op = {Kind::eltwise, "mish"};
          break;
        case Step::tanh:
          op = {Kind::eltwise, "tanh"};
          break;
        case Step::sigmoid:
          op = {Kind::eltwise, "logistic"};
          break;
        case Step::hardswish:
          op = {Kind::eltwise, "hardswish", 1.0f / 6, 0.5f};
          break;
        case Step::softplus:
          op = {Kind::eltwise, "soft_relu", 1, 0};
          break;
        case Step::hardtanh:
          op = {Kind::eltwise, "clip", a, b};
          break;
        default:
          goto done;
      }
      vendor_post_ops_.push_back(op);
      ++vendor_prefix_;
    }
  done:
    vendor_path_ = str_cat("oneDNN matmul(bias", vendor_prefix_ ? str_cat(" + ", vendor_prefix_, " post-op(s)") : "",
                           ")", vendor_prefix_ < steps_.size() ? " + row loops" : "");
  }

  void run_row_op(size_t step_index, const float* from, float* to) {
    const FusionStep& s = steps_[step_index];
    TensorView x = scratch_.view(), y = scratch_.view();
    x.data = const_cast<float*>(from);
    y.data = to;
    if (s.step == Step::softmax) {
      SoftmaxArgs args;
      args.x = x, args.y = y;
      softmax(args);
    } else if (s.step == Step::layer_norm) {
      LayerNormArgs args;
      args.x = x, args.y = y;
      args.weight = in(extra_inputs_[step_index][0]);
      args.bias = in(extra_inputs_[step_index][1]);
      args.eps = 1e-5f;
      layer_norm(args);
    } else {
      RmsNormArgs args;
      args.x = x, args.y = y;
      args.weight = in(extra_inputs_[step_index][0]);
      args.eps = 1e-6f;
      rms_norm(args);
    }
  }

  // The promoted kernel, called through the kernel lab's C ABI.
  void run_found_kernel() {
    auto as_lab = [](const std::vector<std::pair<std::string, TensorView>>& named) {
      std::vector<LabTensor> tensors(named.size());
      for (size_t i = 0; i < named.size(); ++i) {
        const TensorView& view = named[i].second;
        tensors[i].data = view.data;
        tensors[i].dtype = lab_dtype(view.dtype);
        tensors[i].rank = view.shape.rank();
        for (int axis = 0; axis < view.shape.rank(); ++axis) tensors[i].shape[axis] = view.shape[axis];
        tensors[i].name = named[i].first.c_str();
      }
      return tensors;
    };
    auto named_in = named_inputs();
    auto named_out = outputs();
    std::vector<LabTensor> inputs = as_lab(named_in), outputs_abi = as_lab(named_out);
    int status = found_kernel_(inputs.data(), static_cast<int>(inputs.size()), outputs_abi.data(),
                               static_cast<int>(outputs_abi.size()));
    LATHE_CHECK(status == 0, "the found kernel of ", info().name, " returned ", status);
  }

  std::vector<std::vector<const float*>> extra_pointers() const {
    std::vector<std::vector<const float*>> extras;
    for (const auto& indices : extra_inputs_) {
      extras.emplace_back();
      for (size_t index : indices) extras.back().push_back(in_f32(index));
    }
    return extras;
  }

  std::vector<FusionStep> steps_;
  int64_t m_ = 0, n_ = 0, k_ = 0, width_ = 0;
  std::vector<std::vector<size_t>> extra_inputs_;
  Tensor scratch_, scratch_other_;
  Activation fused_activation_ = Activation::none;
  std::vector<std::pair<size_t, size_t>> lathe_segments_;
  std::string lathe_path_, vendor_path_;
  std::vector<OnednnPostOp> vendor_post_ops_;
  size_t vendor_prefix_ = 0;
  std::unique_ptr<OnednnFusedMatmul> vendor_matmul_;
  FoundKernelFn found_kernel_ = nullptr;
};

std::string step_name(const FusionStep& s) {
  switch (s.step) {
    case Step::scale:
      return str_cat("scale(", s.a, ")");
    case Step::add_constant:
      return str_cat("add(", s.a, ")");
    case Step::add_row:
      return "add_bias2";
    case Step::multiply_row:
      return "multiply_channel_scale";
    case Step::add_matrix:
      return "add_residual";
    case Step::multiply_matrix:
      return "multiply_gate";
    case Step::relu:
      return "relu";
    case Step::leaky_relu:
      return str_cat("leaky_relu(", s.a, ")");
    case Step::gelu_tanh:
      return "gelu_tanh";
    case Step::gelu_erf:
      return "gelu";
    case Step::silu:
      return "swish";
    case Step::mish:
      return "mish";
    case Step::tanh:
      return "tanh";
    case Step::sigmoid:
      return "sigmoid";
    case Step::hardswish:
      return "hardswish";
    case Step::softplus:
      return "softplus";
    case Step::hardtanh:
      return str_cat("hardtanh(", s.a, ",", s.b, ")");
    case Step::softmax:
      return "softmax";
    case Step::layer_norm:
      return "layer_norm";
    case Step::rms_norm:
      return "rms_norm";
    case Step::group_norm:
      return str_cat("group_norm(", s.a, " groups)");
    case Step::logsumexp:
      return "logsumexp";
    case Step::row_mean:
      return "mean";
    case Step::row_max:
      return "max";
    case Step::row_sum:
      return "sum";
  }
  return "?";
}

std::string describe_steps(const std::vector<FusionStep>& steps) {
  std::string text = "linear";
  for (const auto& step : steps) text += " -> " + step_name(step);
  return text;
}

}  // namespace

void register_fusion_problems(std::vector<SuiteEntry>& entries) {
  for (const auto& definition : fusion_definitions()) {
    const FusionDefinition* pointer = &definition;
    // Random awkward shapes for the kernel lab's hidden checks: n stays a multiple of the group
    // count of a group norm (every group the same size), and a layer or group norm normalises
    // at least 8 values together. A normalisation of 2 or 4 values divides differences such as
    // x0 - x1 by their spread, multiplying their rounding by up to 1 / sqrt(eps) = 316 where the
    // spread is near sqrt(eps): the worst element of two float paths is then one such row or
    // group, and the ratio of their maxima is too heavy-tailed for the tolerance rule (the found
    // kernels failed 13 of 1500 checks with groups of 1-9 values and 2 of 2000 with layer norms
    // of 2 and 4, the relative norm of every error 10x inside its bound).
    int64_t groups = 1, smallest_group = 1;
    for (const auto& step : definition.steps) {
      if (step.step == Step::group_norm) groups = static_cast<int64_t>(step.a);
      if (step.step == Step::group_norm || step.step == Step::layer_norm) smallest_group = 8;
    }
    entries.push_back({definition.name, "fusion",
                       [pointer](bool quick) -> std::unique_ptr<SuiteProblem> {
                         return quick ? std::make_unique<FusionProblem>(*pointer, 6, 256, 40)
                                      : std::make_unique<FusionProblem>(*pointer, pointer->m, pointer->n, pointer->k);
                       },
                       [pointer, groups, smallest_group](uint64_t seed) -> std::unique_ptr<SuiteProblem> {
                         const int64_t group_size =
                             random_extent(seed, 1, smallest_group, std::max(smallest_group, 300 / groups + 1));
                         return std::make_unique<FusionProblem>(*pointer, random_extent(seed, 0, 1, 37),
                                                                groups * group_size, random_extent(seed, 2, 1, 131));
                       }});
  }
}

}  // namespace lathe
