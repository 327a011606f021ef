#include "lathe/bench/suite/suite_problem.h"

#include "lathe/core/rng.h"

namespace lathe {

SuiteProblem::SuiteProblem(SuiteInfo info, std::string shape_text)
    : info_(std::move(info)), shape_text_(std::move(shape_text)) {}

size_t SuiteProblem::add_input(const std::string& name, const Shape& shape, DType dtype, double low, double high) {
  input_specs_.push_back({name, shape, dtype, low, high});
  inputs_.push_back(Tensor::empty(shape, dtype));
  return inputs_.size() - 1;
}

std::vector<std::pair<std::string, TensorView>> SuiteProblem::named_inputs() const {
  std::vector<std::pair<std::string, TensorView>> named;
  for (size_t i = 0; i < inputs_.size(); ++i) named.emplace_back(input_specs_[i].name, inputs_[i].view());
  return named;
}

size_t SuiteProblem::add_output(const std::string& name, const Shape& shape, DType dtype) {
  output_specs_.push_back({name, shape, dtype, 0, 0});
  outputs_.push_back(Tensor::empty(shape, dtype));
  return outputs_.size() - 1;
}

void SuiteProblem::allocate_inputs() {
  inputs_.clear();
  for (const auto& spec : input_specs_) inputs_.push_back(Tensor::empty(spec.shape, spec.dtype));
}

void SuiteProblem::allocate_outputs() {
  outputs_.clear();
  for (const auto& spec : output_specs_) outputs_.push_back(Tensor::empty(spec.shape, spec.dtype));
}

std::vector<std::pair<std::string, TensorView>> SuiteProblem::outputs() const {
  std::vector<std::pair<std::string, TensorView>> named;
  for (size_t i = 0; i < outputs_.size(); ++i) named.emplace_back(output_specs_[i].name, outputs_[i].view());
  return named;
}

void SuiteProblem::add_cold_copy(uint64_t seed) {
  std::vector<Tensor> live_inputs = inputs_, live_outputs = outputs_;
  allocate_inputs();
  allocate_outputs();
  fill_inputs(seed);
  cold_copies_.emplace_back(inputs_, outputs_);
  inputs_ = live_inputs;
  outputs_ = live_outputs;
}

void SuiteProblem::use_cold_copy(size_t index) {
  inputs_ = cold_copies_.at(index).first;
  outputs_ = cold_copies_.at(index).second;
}

int64_t SuiteProblem::buffer_bytes() const {
  int64_t bytes = 0;
  for (const auto& tensor : inputs_) bytes += tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
  for (const auto& tensor : outputs_) bytes += tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
  return bytes;
}

double SuiteProblem::io_bytes() const { return static_cast<double>(buffer_bytes()); }

void SuiteProblem::fill_inputs(uint64_t seed) {
  for (size_t i = 0; i < inputs_.size(); ++i)
    fill_uniform(inputs_[i].view(), seed, input_specs_[i].low, input_specs_[i].high, i + 1);
}

}  // namespace lathe
