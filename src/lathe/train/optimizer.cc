#include "lathe/train/optimizer.h"

#include <cmath>
#include <map>

#include "lathe/device/device_tensor.h"
#include "lathe/ops/adamw/adamw.h"
#include "lathe/ops/sum_squares/sum_squares.h"

namespace lathe {

AdamWOptimizer::AdamWOptimizer(std::vector<Parameter>& parameters, const OptimizerSection& config)
    : parameters_(parameters), config_(config) {
  for (const Parameter& parameter : parameters_) {
    LATHE_ASSERT(parameter.var->value.dtype() == DType::f32);
    const Device device = parameter.var->value.view().device;
    exp_avg_.push_back(zeros_on(device, parameter.var->value.shape(), DType::f32, "AdamW first moment"));
    exp_avg_sq_.push_back(zeros_on(device, parameter.var->value.shape(), DType::f32, "AdamW second moment"));
  }
}

bool parameter_decays(const Parameter& parameter, const OptimizerSection& config) {
  switch (parameter.kind) {
    case ParameterKind::matrix:
    case ParameterKind::router:
      return true;
    case ParameterKind::norm:
    case ParameterKind::bias:
      return config.decay_norms_and_biases;
    case ParameterKind::embedding:
      return config.decay_embeddings;
    case ParameterKind::buffer:
      return false;
  }
  return true;
}

bool parameter_trains(const Parameter& parameter) {
  return parameter.kind != ParameterKind::buffer && !parameter.frozen;
}

bool AdamWOptimizer::decays(const Parameter& parameter) const { return parameter_decays(parameter, config_); }

double global_gradient_norm(const std::vector<Parameter>& parameters) {
  if (parameters.empty()) return 0.0;
  // One f64 sum on the gradients' device, read back once: sum_squares adds each gradient's chunk
  // sums to it in order, the same bits for every thread count.
  const Device device = parameters.front().var->grad.view().device;
  const Tensor total = empty_on(device, {1}, DType::f64, "gradient norm");
  for (size_t i = 0; i < parameters.size(); ++i) {
    const TensorView grad = parameters[i].var->grad.view();
    sum_squares({grad.reshape({grad.numel()}), total, /*accumulate=*/i > 0});
  }
  return std::sqrt(scalar_value(total));
}

double AdamWOptimizer::gradient_norm() const { return global_gradient_norm(parameters_); }

float gradient_clip_scale(double norm, const OptimizerSection& config) {
  if (config.grad_clip > 0 && norm > config.grad_clip) return static_cast<float>(config.grad_clip / (norm + 1e-6));
  return 1.0f;
}

double AdamWOptimizer::step(int64_t step, double lr) { return this->step(step, lr, gradient_norm()); }

double AdamWOptimizer::step(int64_t step, double lr, double norm) {
  const float scale = gradient_clip_scale(norm, config_);
  std::vector<AdamWArgs> steps;  // one call for all: one launch per 32 tensors on a GPU
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter& parameter = parameters_[i];
    if (!parameter_trains(parameter)) continue;
    const int64_t n = parameter.var->value.numel();
    AdamWArgs args;
    args.param = parameter.var->value.view().reshape({n});
    args.grad = parameter.var->grad.view().reshape({n});
    args.m = exp_avg_[i].view().reshape({n});
    args.v = exp_avg_sq_[i].view().reshape({n});
    if (parameter.var->value_bf16.defined()) args.param_bf16 = parameter.var->value_bf16.view().reshape({n});
    args.lr = static_cast<float>(lr);
    args.beta1 = static_cast<float>(config_.beta1);
    args.beta2 = static_cast<float>(config_.beta2);
    args.eps = static_cast<float>(config_.eps);
    args.weight_decay = decays(parameter) ? static_cast<float>(config_.weight_decay) : 0.0f;
    args.step = step;
    args.grad_scale = scale;
    steps.push_back(args);
  }
  adamw_many(steps);
  return norm;
}

std::vector<std::pair<std::string, Tensor>> AdamWOptimizer::state() const {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    tensors.emplace_back(parameters_[i].name + ".exp_avg", exp_avg_[i]);
    tensors.emplace_back(parameters_[i].name + ".exp_avg_sq", exp_avg_sq_[i]);
  }
  return tensors;
}

void AdamWOptimizer::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, tensor] : tensors) by_name[name] = &tensor;
  auto restore = [&](const std::string& name, const Tensor& into) {
    auto found = by_name.find(name);
    LATHE_CHECK(found != by_name.end(), "optimizer state: missing tensor '", name, "'");
    const Tensor& saved = *found->second;
    LATHE_CHECK(saved.shape() == into.shape() && saved.dtype() == DType::f32, "optimizer state: tensor '", name,
                "' is ", saved.view().describe(), ", expected ", into.view().describe());
    if (into.view().device == Device::cpu)
      write_from_vector(into, to_vector<float>(saved));
    else
      cuda::copy(into, saved);
  };
  for (size_t i = 0; i < parameters_.size(); ++i) {
    restore(parameters_[i].name + ".exp_avg", exp_avg_[i]);
    restore(parameters_[i].name + ".exp_avg_sq", exp_avg_sq_[i]);
  }
}

int64_t AdamWOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (size_t i = 0; i < exp_avg_.size(); ++i) bytes += 2 * exp_avg_[i].numel() * 4;
  return bytes;
}

}  // namespace lathe
